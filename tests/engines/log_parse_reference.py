"""check-log's log parse as it was before issue 26 (one span parse per engine start, every hint-holding line
looked at in Python), kept as the reference the single-scan parse is held to (tests/engines/test_log_scan.py): the
same figures, lines, notes and refusals on any text. The patterns and hints are the readers' of that time, copied
as they were (the readers now write some of them literal-first, and SGLang's server_args hint more narrowly).

Two changes are made on purpose. A start on the same line as the start kept before it is never that start's
repeat (SGLang's two logs of one start are two lines; comparing each of a million starts on one line with the
one before cost 64 KiB each). And a number is bounded (and refused) only in the run read. The old parse refused a
log for a damaged number in a run it then did not read (a crashed start before the one with KV lines); here, as in
the single scan, the runs are looked through with their values as logged and only the run read is converted."""

import re

from kvcalc.engines import logs as L
from kvcalc.engines.logs import LogFacts


VLLM = {
    "patterns": {
        'version': re.compile('Initializing a V1 LLM engine \\(v([^)]+)\\)'),
        'model_id': re.compile("with config: model='([^']+)'"),
        'max_model_len': re.compile('\\bmax_seq_len=(\\d+)'),
        'tp': re.compile('\\btensor_parallel_size=(\\d+)'),
        'pp': re.compile('\\bpipeline_parallel_size=(\\d+)'),
        'kv_cache_dtype': re.compile('\\bkv_cache_dtype=([\\w.]+)'),
        'max_num_batched_tokens': re.compile('max_num_batched_tokens=(\\d+)'),
        'available_gib': re.compile('Available KV cache memory: ([\\d.]+) GiB'),
        'cache_tokens': re.compile('KV cache size: ([\\d,]+) tokens'),
        'concurrency_context': re.compile('Maximum concurrency for ([\\d,]+) tokens per request'),
        'concurrency': re.compile('tokens per request: ([\\d.]+)x'),
        'gpu_blocks': re.compile('# GPU blocks: (\\d+)'),
        'block_size': re.compile('\\bblock_size=(\\d+)\\b(?! bytes)'),
        'dcp': re.compile('\\bdecode_context_parallel_size=(\\d+)'),
        'autofit_context': re.compile('Auto-fit max_model_len: reduced from \\d+ to (\\d+)'),
        'blocks_override': re.compile('Overriding num_gpu_blocks=\\d+ with num_gpu_blocks_override=(\\d+)'),
        'reserved_gib': re.compile('reserved ([\\d.]+) GiB memory for KV Cache as specified by kv_cache_memory_bytes'),
        'group_block_sizes': re.compile('kv cache group sizes \\(([\\d, ]{1,400})\\)'),
        'lcm_block_size': re.compile('kv lcm block sizes (\\d+)'),
        'prefix_caching': re.compile('\\benable_prefix_caching=(True|False)'),
        'gdn_backend': re.compile('Using (FlashInfer|Triton/FLA|CuteDSL|AITER FlyDSL|SYCL|CPU) GDN prefill kernel'),
        'attn_block_size': re.compile('Setting attention block size to (\\d+) tokens'),
        'mamba_padding_pct': re.compile('Padding mamba page size by ([\\d.]+)%'),
        'hybrid_off': re.compile('(Hybrid KV cache manager is disabled) for this hybrid model'),
        'offload_gb': re.compile('Created mmap file [^\\s(]*vllm_offload_[^\\s(]* \\(([\\d.]+) GB\\)'),
        'offload_size': re.compile("'kv_offloading_size': ((?!None\\b)[-\\w.+]{1,40})"),
        'offload_backend': re.compile("'kv_offloading_backend': '(native|lmcache)'"),
    },
    "hints": {
        'version': 'Initializing a V1 LLM engine',
        'model_id': "with config: model='",
        'max_model_len': 'max_seq_len=',
        'tp': 'tensor_parallel_size=',
        'pp': 'pipeline_parallel_size=',
        'kv_cache_dtype': 'kv_cache_dtype=',
        'max_num_batched_tokens': 'max_num_batched_tokens=',
        'available_gib': 'Available KV cache memory: ',
        'cache_tokens': 'KV cache size: ',
        'concurrency_context': 'Maximum concurrency for ',
        'concurrency': 'tokens per request: ',
        'gpu_blocks': '# GPU blocks: ',
        'block_size': 'with config: ',
        'prefix_caching': 'enable_prefix_caching=',
        'gdn_backend': ' GDN prefill kernel',
        'attn_block_size': 'Setting attention block size to ',
        'mamba_padding_pct': 'Padding mamba page size by ',
        'dcp': 'decode_context_parallel_size=',
        'autofit_context': 'Auto-fit max_model_len: ',
        'blocks_override': 'num_gpu_blocks_override=',
        'reserved_gib': 'as specified by kv_cache_memory_bytes',
        'group_block_sizes': 'kv cache group sizes (',
        'lcm_block_size': 'kv lcm block sizes ',
        'hybrid_off': 'Hybrid KV cache manager is disabled',
        'offload_gb': 'Created mmap file ',
        'offload_size': "'kv_offloading_size': ",
        'offload_backend': "'kv_offloading_backend': ",
    },
    "rank_tags": {
        'dp': re.compile('\\((?:EngineCore|Worker|DPEngineCoreActor)_DP(\\d+)'),
        'pp': re.compile('\\(Worker(?:_DP\\d+)?_PP(\\d+)'),
    },
    "run_start": 'Initializing a V1 LLM engine',
    "run_start_twice": False,
}

SGLANG = {
    "patterns": {
        'model_id': re.compile('(?:server_args|ServerArgs\\().*?\\b[\'"]?model_path[\'"]?\\s*[:=]\\s*\'([^\']+)\''),
        'tp': re.compile('(?:server_args|ServerArgs\\().*?\\b[\'"]?tp_size[\'"]?\\s*[:=]\\s*(\\d+)'),
        'dp': re.compile('(?:server_args|ServerArgs\\().*?\\b[\'"]?dp_size[\'"]?\\s*[:=]\\s*(\\d+)'),
        'attn_dp': re.compile('(?:server_args|ServerArgs\\().*?\\b[\'"]?attn_dp_size[\'"]?\\s*[:=]\\s*(\\d+)'),
        'pp': re.compile('(?:server_args|ServerArgs\\().*?\\b[\'"]?pp_size[\'"]?\\s*[:=]\\s*(\\d+)'),
        'enable_dp_attention': re.compile('(?:server_args|ServerArgs\\().*?\\b[\'"]?enable_dp_attention[\'"]?\\s*[:=]\\s*(True|False)'),
        'mem_fraction_static': re.compile('(?:server_args|ServerArgs\\().*?\\b[\'"]?mem_fraction_static[\'"]?\\s*[:=]\\s*([\\d.]+)'),
        'page_size': re.compile('(?:server_args|ServerArgs\\().*?\\b[\'"]?page_size[\'"]?\\s*[:=]\\s*(\\d+)'),
        'kv_cache_dtype': re.compile('(?:server_args|ServerArgs\\().*?\\b[\'"]?kv_cache_dtype[\'"]?\\s*[:=]\\s*\'([\\w.]+)\''),
        'swa_full_tokens_ratio': re.compile('(?:server_args|ServerArgs\\().*?\\b[\'"]?swa_full_tokens_ratio[\'"]?\\s*[:=]\\s*([\\d.]+)'),
        'server_mrr': re.compile('(?:server_args|ServerArgs\\().*?\\b[\'"]?max_running_requests[\'"]?\\s*[:=]\\s*(\\d+)'),
        'mamba_strategy': re.compile('(?:server_args|ServerArgs\\().*?\\b[\'"]?mamba_radix_cache_strategy[\'"]?\\s*[:=]\\s*\'(auto|no_buffer|extra_buffer|extra_buffer_lazy)\''),
        'disable_overlap_schedule': re.compile('(?:server_args|ServerArgs\\().*?\\b[\'"]?disable_overlap_schedule[\'"]?\\s*[:=]\\s*(True|False)'),
        'disable_radix_cache': re.compile('(?:server_args|ServerArgs\\().*?\\b[\'"]?disable_radix_cache[\'"]?\\s*[:=]\\s*(True|False)'),
        'max_mamba_cache_size': re.compile('(?:server_args|ServerArgs\\().*?\\b[\'"]?max_mamba_cache_size[\'"]?\\s*[:=]\\s*(\\d+)'),
        'kv_dtype': re.compile('(?<!SWA )KV Cache is allocated\\. dtype: torch\\.(\\w+)'),
        'kv_tokens': re.compile('(?<!SWA )KV Cache is allocated\\.(?: dtype: [\\w.]+,)? #tokens: (\\d+)'),
        'k_gib': re.compile('(?<!SWA )KV Cache is allocated\\..*K size: ([\\d.]+) GB'),
        'kv_gib': re.compile('(?<!SWA )KV Cache is allocated\\..*\\bKV size: ([\\d.]+) GB'),
        'swa_tokens': re.compile('swa_layer_tokens=(\\d+)'),
        'swa_k_gib': re.compile('SWA KV Cache is allocated\\..*\\bK size: ([\\d.]+) GB'),
        'chunk_window': re.compile('Setting sliding_window_size to be attention_chunk_size: (\\d+)'),
        'mamba_slots': re.compile('max_mamba_cache_size: (\\d+)'),
        'max_total_num_tokens': re.compile('max_total_num_tokens=(\\d+)'),
        'dsv4_full': re.compile('DSV4 pool sizes: full=(\\d+)'),
        'dsv4_swa': re.compile('DSV4 pool sizes: .*\\bswa=(\\d+)'),
        'dsv4_c4': re.compile('DSV4 pool sizes: .*\\bc4=(\\d+)'),
        'dsv4_c128': re.compile('DSV4 pool sizes: .*\\bc128=(\\d+)'),
        'dsv4_c4_state': re.compile('DSV4 pool sizes: .*\\bc4_state=(\\d+)'),
        'max_running_requests': re.compile('max_total_num_tokens=.*\\bmax_running_requests=(\\d+)'),
        'post_tokens': re.compile('Post-capture KV sizing: KV cache allocated\\. dtype: [\\w.]+, #tokens: (\\d+)'),
        'post_kv_gib': re.compile('\\bKV size: ([\\d.]+) GB'),
        'context_len': re.compile('\\bcontext_len=(\\d+)'),
        'hicache_on': re.compile('(?:server_args|ServerArgs\\().*?\\b[\'"]?enable_hierarchical_cache[\'"]?\\s*[:=]\\s*(True|False)'),
        'hicache_ratio': re.compile('(?:server_args|ServerArgs\\().*?\\b[\'"]?hicache_ratio[\'"]?\\s*[:=]\\s*((?!None\\b)[-\\w.+]{1,40})'),
        'hicache_size': re.compile('(?:server_args|ServerArgs\\().*?\\b[\'"]?hicache_size[\'"]?\\s*[:=]\\s*(\\d+)'),
        'hicache_layout': re.compile('(?:server_args|ServerArgs\\().*?\\b[\'"]?hicache_mem_layout[\'"]?\\s*[:=]\\s*\'(\\w+)\''),
        'hicache_kv_tokens': re.compile('Allocating (?:kv|full) hierarchical KV host pool: (\\d+) tokens'),
        'hicache_kv_gb': re.compile('Allocating (?:kv|full) hierarchical KV host pool: .*? tokens, ([\\d.]+) GB'),
        'hicache_swa_tokens': re.compile('Allocating swa hierarchical KV host pool: (\\d+) tokens'),
        'hicache_mamba_slots': re.compile('host memory for hierarchical Mamba cache \\((\\d+) state slots'),
        'hicache_old_gb': re.compile('Allocating ([\\d.]+) GB host memory for hierarchical KV cache'),
        'hicache_auto_ratio': re.compile('HiCache auto-sizing: ratio [\\d.]+ -> ([\\d.]+);'),
    },
    "hints": {
        'model_id': 'erver',
        'tp': 'erver',
        'dp': 'erver',
        'attn_dp': 'erver',
        'pp': 'erver',
        'enable_dp_attention': 'erver',
        'mem_fraction_static': 'erver',
        'page_size': 'erver',
        'kv_cache_dtype': 'erver',
        'swa_full_tokens_ratio': 'erver',
        'server_mrr': 'erver',
        'mamba_strategy': 'erver',
        'disable_overlap_schedule': 'erver',
        'disable_radix_cache': 'erver',
        'max_mamba_cache_size': 'erver',
        'kv_dtype': 'KV Cache is allocated.',
        'kv_tokens': 'KV Cache is allocated.',
        'k_gib': 'KV Cache is allocated.',
        'kv_gib': 'KV Cache is allocated.',
        'dsv4_full': 'DSV4 pool sizes: ',
        'dsv4_swa': 'DSV4 pool sizes: ',
        'dsv4_c4': 'DSV4 pool sizes: ',
        'dsv4_c128': 'DSV4 pool sizes: ',
        'dsv4_c4_state': 'DSV4 pool sizes: ',
        'swa_tokens': 'swa_layer_tokens=',
        'swa_k_gib': 'SWA KV Cache is allocated.',
        'chunk_window': 'Setting sliding_window_size to be',
        'mamba_slots': 'max_mamba_cache_size: ',
        'max_total_num_tokens': 'max_total_num_tokens=',
        'max_running_requests': 'max_total_num_tokens=',
        'context_len': 'context_len=',
        'post_tokens': 'Post-capture KV sizing: KV cache allocated.',
        'post_kv_gib': 'Post-capture KV sizing: KV cache allocated.',
        'hicache_on': 'erver',
        'hicache_ratio': 'erver',
        'hicache_size': 'erver',
        'hicache_layout': 'erver',
        'hicache_kv_tokens': ' hierarchical KV host pool: ',
        'hicache_kv_gb': ' hierarchical KV host pool: ',
        'hicache_swa_tokens': ' hierarchical KV host pool: ',
        'hicache_mamba_slots': 'for hierarchical Mamba cache (',
        'hicache_old_gb': 'for hierarchical KV cache',
        'hicache_auto_ratio': 'HiCache auto-sizing: ratio ',
    },
    "rank_tags": {
        'dp': re.compile('(?:^|[\\s|])\\[[^\\]\\n]{0,80}? DP(\\d+)(?=[ \\]])', re.M),
        'pp': re.compile('(?:^|[\\s|])\\[[^\\]\\n]{0,80}? PP(\\d+)(?=[ \\]])', re.M),
    },
    "run_start": 'server_args=',
    "run_start_twice": True,
}


def parse(reader, old: dict, text: str, source: str = "log") -> LogFacts:
    """LogReader.parse before issue 26, on the reader ``reader`` (its figures, _value, recognises) with the
    patterns, hints, rank tags and start line of ``old`` (VLLM or SGLANG above)."""
    ranks = _lowest_ranks(old, text)
    starts = _run_starts(reader, old, text)
    cuts = [0] + [text.rfind("\n", 0, at) + 1 for at in starts[1:]] + [len(text)]
    facts, newlines, prev = LogFacts(), 0, 0
    for i, (lo, hi) in enumerate(zip(cuts, cuts[1:])):
        newlines += text.count("\n", prev, lo)
        prev = lo
        facts = _parse_span(reader, old, text, lo, hi, source, ranks, newlines, convert=False)
        if reader.recognises(facts) or hi == len(text):
            facts = _parse_span(reader, old, text, lo, hi, source, ranks, newlines)
        if reader.recognises(facts):
            if len(cuts) > 2:
                facts.notes.append(f"the log holds {len(cuts) - 1:,} engine starts; read run {i + 1:,}, from line "
                                   f"{newlines + 1:,} (the first with KV figures)")
            break
    facts.source = source
    facts.ranks = {kind: low for kind, (low, _) in ranks.items()}
    for kind, (low, n) in ranks.items():
        if n > 1:
            facts.notes.append(f"the log holds lines of {n} {kind.upper()} ranks; read {kind.upper()}{low}'s")
    return facts


def _run_starts(reader, old, text):
    found = [m.start() for m in re.finditer(re.escape(old["run_start"]), text)]
    if not old["run_start_twice"]:
        return found
    hints = {old["hints"][k] for k in reader.figures if k in old["hints"]}
    out, first = [], None

    def line(at):
        end = text.find("\n", at)
        return text[at:end if end >= 0 else len(text)][:L.MAX_LINE]

    for at in found:
        this = line(at)
        same_line = bool(out) and "\n" not in text[out[-1]:at]
        if (first is not None and not same_line and this == first
                and not any(text.find(h, out[-1], at) >= 0 for h in hints)):
            first = None
            continue
        out.append(at)
        first = this
    return out


def _lowest_ranks(old, text):
    out = {}
    for kind, pat in old["rank_tags"].items():
        seen = {int(m.group(1)) for m in pat.finditer(text) if len(m.group(1)) <= 6}
        if seen:
            out[kind] = (min(seen), len(seen))
    return out


def _other_rank(old, line, ranks):
    for kind, (low, _) in ranks.items():
        m = old["rank_tags"][kind].search(line)
        if m and int(m.group(1)[:7]) != low:
            return True
    return False


def _parse_span(reader, old, text, lo, hi, source, ranks, newlines, convert=True):
    facts = LogFacts()
    todo = dict(old["patterns"])
    hint_of = old["hints"]
    scan = re.compile("|".join(re.escape(h) for h in sorted(set(hint_of.values()), key=len, reverse=True)))
    last_start, pos = -1, lo
    for hit in scan.finditer(text, lo, hi):
        start = text.rfind("\n", 0, hit.start()) + 1
        if start == last_start:
            continue
        last_start = start
        end = text.find("\n", hit.start())
        line = text[start:(end if end >= 0 else len(text))][:L.MAX_LINE]
        newlines += text.count("\n", pos, start)
        pos, no = start, newlines + 1
        if ranks and _other_rank(old, line, ranks):
            continue
        for key in [k for k in todo if hint_of[k] in line]:
            m = todo[key].search(line)
            if m:
                facts.values[key] = reader._value(key, m.group(1), f"{source}:{no}") if convert else m.group(1)
                facts.lines[key] = no
                del todo[key]
        if not todo:
            break
    return facts
