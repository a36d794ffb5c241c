"""Rendering: text tables and lines, JSON shaping and plots for each command. Rendering only: no arithmetic."""
