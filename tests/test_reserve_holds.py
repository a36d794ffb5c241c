"""A reserve is never smaller than what it holds. Wherever an engine's figure stands beside an exact one, the exact
bytes are counted in the formats that engine stores (Engine.stored_formats), and the blocks or pages the engine gives
a request hold at least those bytes: for every shipped model on every engine, at every precision the model declares,
on Hopper's and Blackwell's kernels, at a few contexts and tensor-parallel sizes, as capacity and transfer report
them (the request's total and each cache group's). Deployments an engine refuses are skipped (each model runs
somewhere: the exact engine takes them all)."""

import pytest

import kvcalc
from kvcalc.capacity import Parallel, capacity
from kvcalc.engines import get_engine
from kvcalc.errors import KvcalcError
from kvcalc.transfer import transfer

MODELS = kvcalc.config_names()
ENGINES = ("vllm", "sglang", "exact")
#: Hopper's rows and blocks, Blackwell's (SGLang's raw fp8 DSA row, FlashInfer MLA blocks) and ROCm's
GPUS = (None, "b200", "mi300x")
POOL = 1 << 44  # a KV pool that holds one request of any context here: the fit never refuses


def _contexts(model, engine) -> list[int]:
    """1 token, inside the first state blocks and windows, past the first blocks, 64k, and the longest prompt the
    engine takes (its context less SGLang's 7)."""
    limit = engine.context_limit(model) or (1 << 20)
    return sorted({c for c in (1, 7, 100, 4097, 65_537, limit - 7) if 1 <= c <= limit - 7})


def _holds(pages: list[dict]) -> None:
    for g in pages:
        assert g["reserved_bytes_per_request"] >= g["analytic_bytes_per_request"], g


@pytest.mark.parametrize("name", MODELS)
def test_reserved_is_never_less_than_held_at_the_engines_formats(name):
    from kvcalc.present.capacity import capacity_json

    model = kvcalc.load_model(name)
    ran = 0
    for engine_name in ENGINES:
        eng = get_engine(engine_name)
        for precision in model.precisions:
            for gpu in GPUS:
                for ctx in _contexts(model, eng):
                    for tp in (1, 8):
                        where = f"{name} {engine_name} {precision} {gpu} {ctx} tp {tp}"
                        try:
                            t = transfer(model, ctx, engine=engine_name, precision=precision, tp=tp, gpu=gpu)
                        except KvcalcError:
                            continue
                        ran += 1
                        assert t.reserved_bytes >= t.stored_bytes, where
                        if ctx not in (1, 100, 65_537) or gpu == "mi300x":
                            continue  # capacity at a sample of the same points (it plans the same request)
                        try:
                            c = capacity(model, ctx, engine=engine_name, precision=precision, parallel=Parallel(tp=tp),
                                         gpu=gpu, kv_memory=POOL)
                        except KvcalcError:
                            continue
                        j = capacity_json(c)
                        assert j["per_request_bytes"] >= j["analytic_bytes"], where
                        _holds(j["pages"])
    assert ran


def test_v4_on_vllm_holds_a_compressor_row_per_token_of_its_span():
    """vLLM keeps DeepSeek V4's compressor state as span-token slots (models/deepseek_v4/compressor.py
    CompressorStateCache, a SlidingWindowMLASpec of span = coff x ratio tokens, each slot 2 x coff x head_dim fp32):
    after 100 tokens a c4 layer's states hold min(100, 8) rows and a c128 layer's min(100, 128), where a whole ring
    (the estimate's complete basis, the exact engine, SGLang's rings) would be 8 and 128 rows from the first token."""
    t = transfer("deepseek-v4-pro", 100, precision="fp8")
    c4_rows = (2 * 2 * 512 + 2 * 2 * 128) * 4  # attention and indexer compressor rows: coff 2, dims 512 and 128
    c128_row = 2 * 1 * 512 * 4
    # 61 layers' 100-entry windows of 584 B; 30 c4a layers' 100 // 4 = 25 entries (584 B) and indexer keys (vLLM's
    # 132 B) and 8 state rows; 31 c128a layers' 100 // 128 = 0 entries and 100 state rows
    held = 61 * 100 * 584 + 30 * (25 * (584 + 132) + 8 * c4_rows) + 31 * 100 * c128_row
    assert t.stored_bytes == held == 19_254_600 and t.reserved_bytes >= held
    assert t.stored_formats["c128_state"] == "fp32 per token"
    # at one token: 1 row of each state; the reserve (2 blocks in each state group) still holds it
    one = transfer("deepseek-v4-pro", 1, precision="fp8")
    assert one.stored_bytes == 61 * 584 + 30 * c4_rows + 31 * c128_row <= one.reserved_bytes
    # the exact engine keeps whole rings: 8 and 128 rows from the first token
    exact = transfer("deepseek-v4-pro", 1, precision="fp8", engine="exact")
    assert exact.stored_bytes == 61 * 584 + 30 * 8 * c4_rows + 31 * 128 * c128_row == 18_746_152
