"""Engine profiles: how a serving engine pages the caches of a model (see kvcalc.plan)."""
