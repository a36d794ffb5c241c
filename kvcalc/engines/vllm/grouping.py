"""vLLM 0.33's KV-cache groups (``v1/core/kv_cache_planning.py::get_kv_cache_groups``)."""

from __future__ import annotations

from dataclasses import replace

from ...errors import KvcalcError
from .defaults import VERSION
from .specs import LayerSpec, block_outermost

def _approximate_gcd(values: list[int], lower_bound: int) -> int:
    """The chunk size d >= lower_bound that pads sum(ceil(x / d) * d - x) least; ties go to the larger d
    (_approximate_gcd)."""
    best_d, best_pad = lower_bound, None
    for d in range(max(1, lower_bound), max(values) + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad < best_pad or (pad == best_pad and d > best_d):
            best_d, best_pad = d, pad
    return best_d


def _max_layers_per_page(bucket: list[LayerSpec]) -> int:
    counts: dict[int, int] = {}
    for s in bucket:
        counts[s.page_bytes] = counts.get(s.page_bytes, 0) + 1
    return max(counts.values())


def promote_local(specs: list[LayerSpec]) -> tuple[list[LayerSpec], bool]:
    """--disable-hybrid-kv-cache-manager (kv_cache_planning.py unify_hybrid_kv_cache_specs,
    _promote_local_kv_cache_specs): where the attention layers mix full attention with sliding-window or chunked
    layers, those become FullAttentionSpec at the full layers' block size (every token keeps its blocks); state
    layers stay as they are. Returns the specs and whether any was promoted; vLLM's ValueError where the
    attention layers still are not one type."""
    if any(s.spec == "SlidingWindowMLASpec" for s in specs):
        raise KvcalcError(f"hybrid_kv_cache_manager: kvcalc plans DeepSeek V4 on vLLM {VERSION} only with the hybrid "
                          "KV-cache manager on ({{hybrid_kv_cache_manager}}, the default); it does not model V4 "
                          "without it", param="hybrid_kv_cache_manager")
    attn = [s for s in specs if s.state_blocks is None]
    local = [s for s in attn if s.window is not None or s.chunk is not None]
    full_blocks = {s.block_size for s in attn if s.window is None and s.chunk is None}
    if full_blocks and local:
        block = next(iter(full_blocks)) if len(full_blocks) == 1 else None
        specs = [replace(s, spec="FullAttentionSpec", base="full", window=None, chunk=None,
                         block_size=block or s.block_size) if s in local else s for s in specs]
        attn = [s for s in specs if s.state_blocks is None]
    if len({s.uniform_key() for s in attn}) > 1:
        raise KvcalcError(f"hybrid_kv_cache_manager: vLLM {VERSION} refuses this model without the hybrid KV-cache "
                          "manager: \"Failed to promote local KV cache specs to one unified type.\"",
                          param="hybrid_kv_cache_manager")
    return specs, bool(full_blocks and local)


def group_layers(specs: list[LayerSpec]) -> tuple[list[list[LayerSpec]], str, int]:
    """vLLM's KV-cache groups (lists of layer specs), the rule that made them, and the padding layers
    added (get_kv_cache_groups)."""
    if len({s.key() for s in specs}) == 1:
        return [specs], "one spec: one group (_get_kv_cache_groups_uniform_spec)", 0
    if len({s.uniform_key() for s in specs}) == 1:
        return [specs], "one uniform type: one group (UniformTypeKVCacheSpecs)", 0
    if block_outermost(specs) and len({s.page_bytes for s in specs}) > 1:
        return _packed(specs), "packed groups, block-outermost layout (_get_packed_kv_cache_groups)", 0
    return _uniform_page(specs)


def _packed(specs: list[LayerSpec]) -> list[list[LayerSpec]]:
    buckets: list[list[LayerSpec]] = []
    for s in specs:  # greedy: the first bucket the spec keeps uniform
        for b in buckets:
            if b[0].uniform_key() == s.uniform_key():
                b.append(s)
                break
        else:
            buckets.append([s])
    info = []
    for b in buckets:
        by_page: dict[int, list[LayerSpec]] = {}
        for s in b:
            by_page.setdefault(s.page_bytes, []).append(s)
        balanced = len({len(v) for v in by_page.values()}) == 1
        info.append((b, by_page, balanced))
    floor = max((_max_layers_per_page(b) for b, by_page, bal in info if bal and len(by_page) > 1), default=0)
    repeats = _approximate_gcd([_max_layers_per_page(b) for b, _, bal in info if bal], floor) if floor else None
    if repeats is None:  # pragma: no cover - needs a packed model without a mixed balanced bucket
        raise KvcalcError("{{engine}} vllm: this layer mix takes a state-bucket split kvcalc does not model")
    groups = []
    for b, by_page, bal in info:
        n = -(-_max_layers_per_page(b) // repeats) if bal else 1
        if n == 1:
            groups.append(b)
            continue
        pattern = list(zip(*by_page.values()))
        for i in range(n):
            groups.append([s for rep in pattern[i::n] for s in rep])
    return groups


def _uniform_page(specs: list[LayerSpec]) -> tuple[list[list[LayerSpec]], str, int]:
    pages = {s.page_bytes for s in specs}
    if len(pages) > 1:  # unify_kv_cache_spec_page_size: a page dividing the largest scales its block size
        target = max(pages)
        unified = []
        for s in specs:
            if s.page_bytes == target:
                unified.append(s)
            elif s.state_blocks is not None:  # MambaSpec: its page does not scale with the block, it is padded
                unified.append(replace(s, padded_page=target))
            elif target % s.page_bytes == 0 and s.alignment == 1 and s.real_page_bytes == s.page_bytes:
                unified.append(replace(s, block_size=s.block_size * (target // s.page_bytes)))
            elif "MLA" not in s.spec and s.alignment == 1:  # a non-MLA attention page: page_size_padded
                unified.append(replace(s, padded_page=target))
            else:
                raise KvcalcError(
                    f"{{{{engine}}}} vllm: page sizes {sorted(pages)} cannot be unified: vLLM {VERSION} pads only non-MLA "
                    "attention pages (unify_kv_cache_spec_page_size raises NotImplementedError here)"
                )
        specs = unified
    buckets: dict[tuple, list[LayerSpec]] = {}
    for s in specs:
        buckets.setdefault(s.key(), []).append(s)
    sizes = [len(b) for b in buckets.values()]
    group_size = max(sizes) if max(sizes) < min(sizes) * 1.5 else min(sizes)
    groups, padding = [], 0
    for b in buckets.values():
        n = -(-len(b) // group_size)
        padding += n * group_size - len(b)
        groups.extend(b[i::n] for i in range(n))
    return groups, "equal-page groups of equal layer count (_get_kv_cache_groups_uniform_page_size)", padding


