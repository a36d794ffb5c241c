"""Test inputs that reach the corners of the formats: scale spread, power-of-two edges, floors, zeros."""

import torch


def rows(n: int, dim: int, gen: torch.Generator, dtype=torch.bfloat16) -> torch.Tensor:
    """n rows of dim values; magnitudes vary by 2**[-14, 10] every 16 values, with special rows mixed in."""
    g = torch.randn(n, dim, generator=gen)
    mag = torch.ldexp(torch.ones(n, (dim + 15) // 16), torch.randint(-14, 11, (n, (dim + 15) // 16), generator=gen))
    x = g * mag.repeat_interleave(16, dim=1)[:, :dim]
    if n >= 2:
        # amax exactly on a power-of-two edge of the fp8 (448 * 2**k) and fp4 (6 * 2**k) scales
        x[1] = torch.linspace(-1, 1, dim)
        x[1, ::64] = 448.0 * 2.0 ** -3
        x[1, 1::32] = -6.0 * 2.0 ** 2
    if n >= 3:
        x[2] = 0.0
        x[2, 1::2] = -0.0
        x[2, : dim // 4] = 3e-7  # below every amax / scale floor
    if n >= 4:
        x[3] = torch.randn(dim, generator=gen) * 1e-3
    return x.to(dtype)
