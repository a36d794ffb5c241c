"""Token counts in, byte counts out. All units are binary: k = 2**10, M = 2**20, G = 2**30 tokens,
KiB/MiB/GiB = 2**10/2**20/2**30 bytes."""

from __future__ import annotations

import re

from .errors import KvcalcError, quote

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
TIB = 1 << 40

TOKEN_SUFFIXES = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}

# Contexts beyond this are treated as typos rather than plans: 2**32 tokens is 4,096x a 1M window.
MAX_TOKENS = 1 << 32

_THOUSANDS_RE = re.compile(r"^\s*\d{1,3}(,\d{3})+\s*$")
# ASCII digits only: Python's \d and int() also take Arabic-Indic or full-width digits ('١٢٨', '１２８k')
_TOKEN_RE = re.compile(r"^[ \t]*([0-9]+(?:\.[0-9]+)?)[ \t]*([kKmMgG]?)[ \t]*$", re.ASCII)


def parse_tokens(text: str, what: str = "context") -> int:
    """Parse '1M' (1,048,576), '128k' (131,072), '1.5M' or a plain integer into a token count.

    Suffixes are binary (k = 1024). Underscores group digits ('1_048_576'); commas do not, since they
    separate several contexts on the command line.
    """
    raw = str(text)
    cleaned = raw.replace("_", "")
    m = _TOKEN_RE.match(cleaned)
    if not m:
        raise KvcalcError(
            f"{what}: {quote(raw)} is not a token count; use a positive integer or a binary suffix "
            "k/M/G (1M = 1,048,576 tokens, 128k = 131,072)", param=what)
    number, suffix = m.group(1), m.group(2).lower()
    if len(number) > 40:  # far beyond any limit; also keeps int() below Python's 4,300-digit conversion cap
        raise KvcalcError(f"{what}: {quote(raw)} ({len(number):,} digits) is beyond the supported limit of "
                          f"{MAX_TOKENS:,} tokens (4G)", param=what)
    mult = TOKEN_SUFFIXES[suffix]
    if "." in number:
        whole, frac = number.split(".")
        # exact rational arithmetic: value = (whole.frac) * mult must be an integer
        numerator = int(whole + frac) * mult
        denominator = 10 ** len(frac)
        if numerator % denominator:
            raise KvcalcError(f"{what}: {quote(raw)} is not a whole number of tokens", param=what)
        value = numerator // denominator
    else:
        value = int(number) * mult
    if value <= 0:
        raise KvcalcError(f"{what}: {quote(raw)} must be at least 1 token", param=what)
    if value > MAX_TOKENS:
        raise KvcalcError(
            f"{what}: {quote(raw)} ({value:,} tokens) is beyond the supported limit of {MAX_TOKENS:,} tokens (4G)", param=what)
    return value


def parse_token_list(values: list[str] | tuple[str, ...], what: str = "context") -> list[int]:
    """Parse repeated and/or comma-separated token counts: ['128k,1M', '2M'] -> [131072, 1048576, 2097152].

    '1,048,576' is refused rather than read as three contexts (1, 48 and 576): it is ambiguous."""
    out: list[int] = []
    for item in values:
        if _THOUSANDS_RE.match(str(item)):
            raise KvcalcError(
                f"{what}: {quote(item)} is ambiguous: commas separate contexts; write {str(item).replace(',', '')} "
                f"or {str(item).replace(',', '_')} for one context", param=what)
        for part in str(item).split(","):
            if not part.strip():
                raise KvcalcError(f"{what}: empty value in {quote(item)}", param=what)
            out.append(parse_tokens(part, what))
    if not out:
        raise KvcalcError(f"{what}: give at least one context length", param=what)
    return out


def format_tokens(n: int) -> str:
    """1048576 -> '1M', 131072 -> '128k', 1000 -> '1000' (binary suffixes, exact only)."""
    for suffix, mult in (("G", 1 << 30), ("M", 1 << 20), ("k", 1 << 10)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{suffix}"
    return str(n)


def tokens_text(n: int) -> str:
    """A token count for a sentence: '1,048,576 (1M)' where a binary suffix names it exactly, else '131,077'
    (never a bare '131077')."""
    short = format_tokens(n)
    return f"{n:,} ({short})" if short != str(n) else f"{n:,}"


def format_bytes(n: float, digits: int = 2) -> str:
    """Human bytes in binary units: 1408 -> '1.38 KiB', 90060095488 -> '83.88 GiB' (83.875 GiB)."""
    n = float(n)
    for unit, size in (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(n) >= size:
            return f"{n / size:.{digits}f} {unit}"
    return f"{int(n)} B"


UNIT_BYTES = {"B": 1, "KiB": KIB, "MiB": MIB, "GiB": GIB, "TiB": TIB}
#: every byte unit a count may carry, by its lower-case spelling: binary (KiB = 2^10) and decimal (kB = 10^3)
_BYTE_UNITS = {"": 1, "b": 1, "kib": KIB, "mib": MIB, "gib": GIB, "tib": TIB,
               "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
#: a bare K / M / G / T: 2^30 or 10^9? Refused with both spellings, never guessed
_AMBIGUOUS = {"k": "KiB", "m": "MiB", "g": "GiB", "t": "TiB"}

_BYTES_RE = re.compile(r"^[ \t]*([0-9]+(?:\.[0-9]+)?)[ \t]*([A-Za-z]*)[ \t]*$", re.ASCII)


def parse_bytes_rounded(text: str, what: str = "bytes") -> tuple[int, str | None]:
    """'20GiB', '512 MiB', '10GB', '57.3GiB', '21474836480' -> (bytes, a note or None). Binary units (KiB, MiB,
    GiB, TiB: powers of 2^10) and decimal ones (kB, MB, GB, TB: powers of 10^3), in any case; a bare number is
    bytes. A fraction of a byte is rounded to the nearest whole byte and the note says so; a bare K/M/G/T is
    refused as ambiguous."""
    raw = str(text)
    m = _BYTES_RE.match(raw.replace("_", ""))
    unit = m.group(2).lower() if m else ""
    if m and unit in _AMBIGUOUS:
        number, b = m.group(1), _AMBIGUOUS[unit]
        raise KvcalcError(f"{what}: {quote(raw)} is ambiguous: write {number}{b} (binary, 2^{10 * ('kmgt'.index(unit) + 1)}) "
                          f"or {number}{b[0].upper() if b[0] != 'K' else 'k'}B (decimal, 10^{3 * ('kmgt'.index(unit) + 1)})",
                          param=what)
    if not m or unit not in _BYTE_UNITS:
        raise KvcalcError(f"{what}: {quote(raw)} is not a byte count; use a number of bytes, or KiB/MiB/GiB/TiB "
                          "(binary) or kB/MB/GB/TB (decimal)", param=what)
    number = m.group(1)
    if len(number) > 40:  # beyond 1 EiB in any unit; also keeps int() below Python's 4,300-digit conversion cap
        raise KvcalcError(f"{what}: {quote(raw)} ({len(number):,} digits) must be from 1 B to 1 EiB", param=what)
    whole, _, frac = number.partition(".")
    num = int(whole + frac) * _BYTE_UNITS[unit]
    den = 10 ** len(frac)
    value, rest = divmod(num, den)
    note = None
    if rest:
        exact = f"{value:,}.{str(rest * 10**len(frac) // den).rjust(len(frac), '0').rstrip('0')}"
        value += 1 if 2 * rest >= den else 0
        note = f"{what}: {raw.strip()} is {exact} B; rounded to {value:,} B"
    if not 0 < value <= 1 << 60:
        raise KvcalcError(f"{what}: {quote(raw)} must be from 1 B to 1 EiB", param=what)
    return value, note


def parse_bytes(text: str, what: str = "bytes") -> int:
    """:func:`parse_bytes_rounded` without its note."""
    return parse_bytes_rounded(text, what)[0]
