"""kvcalc transfer: what one request's cache moves from prefill to decode, by hand for each connector rule."""

import pytest

from kvcalc.errors import KvcalcError
from kvcalc.transfer import transfer

M = 1 << 20
LLAMA_TOKEN = 32 * 8 * 128 * 2 * 2  # Llama-3.1-8B: 32 layers x 8 KV heads x 128 x (K, V) x bf16 = 128 KiB a token


def test_vllm_moves_whole_blocks_padding_included():
    t = transfer("llama-3.1-8b", 8001)
    # NixlConnector reads cdiv(8,001, 16) = 501 blocks of 16 tokens, the last (1 token) whole
    assert [(g.units, g.unit_bytes) for g in t.plan.groups] == [(501, 16 * LLAMA_TOKEN)]
    assert t.transfer_bytes == 501 * 16 * LLAMA_TOKEN and t.stored_bytes == 8001 * LLAMA_TOKEN
    assert t.plan.aux_bytes == 0  # the decoder recomputes the last prompt token instead


def test_sglang_moves_pages_and_one_metadata_row():
    t = transfer("llama-3.1-8b", 8001, engine="sglang")
    # page_size 1: 8,001 pages, K and V buffers of 32 layers; MetadataBuffers rows: 4 x 16 x 4 B + 2 x 128 x 4 B
    # (top logprobs) + 16 x 4 B (top-k p) + 16 x 8 B (top-k index) + 16 x 4 B (hidden row) + 8 x 8 B = 1,600 B
    assert t.cache_bytes == 8001 * LLAMA_TOKEN and t.plan.aux_bytes == 1600
    assert t.transfer_bytes == 8001 * LLAMA_TOKEN + 1600


def test_exact_moves_what_the_request_holds():
    t = transfer("deepseek-v4-flash", 8192, engine="exact", precision="fp8")
    assert t.transfer_bytes == t.stored_bytes == 44_209_152  # the estimate's complete basis at 8k


def test_sliding_window_moves_only_the_window_blocks():
    t = transfer("gpt-oss-120b", 8192)
    window, full = t.plan.groups
    # 18 sliding layers: blocks of 16 before token 8,192 - 128 + 1 are null on the decoder: 8,065 // 16 = 504
    # skipped of cdiv(8,192, 16) = 512, so 8 blocks; a block of 18 layers x 16 tokens x 8 heads x 64 x K,V x 2 B
    block = 18 * 16 * 8 * 64 * 2 * 2
    assert (window.units, window.unit_bytes) == (8, block) and (full.units, full.unit_bytes) == (512, block)
    s = transfer("gpt-oss-120b", 8192, engine="sglang")
    # SGLang's sliding_window_size for gpt-oss is 127: pages from 8,192 - 127 = 8,065, so 127 one-token pages
    assert [g.units for g in s.plan.groups] == [8192, 127]


def test_state_hybrid_moves_one_state_block_and_one_token_less():
    t = transfer("qwen3.5-9b", 8192)
    states = [g for g in t.plan.groups if g.unit == "state slot"]
    full = next(g for g in t.plan.groups if g.kind == "full")
    # vLLM's prefiller stops one token short for Mamba-style state (the decoder computes the last): cdiv(8,191, 576)
    # = 15 blocks of 8 full-attention layers x 576 tokens x 4 KV heads x 256 x K,V x 2 B
    assert t.plan.tokens_moved == 8191 and full.units == 15 and full.unit_bytes == 8 * 576 * 4 * 256 * 2 * 2
    # three groups of 8 gated-DeltaNet layers, each the running state's real bytes: conv 49,152 + recurrent
    # 2,097,152 B a layer (not the 2,359,296 B padded page)
    assert [g.unit_bytes for g in states] == [8 * (49_152 + 2_097_152)] * 3


def test_v4_pro_at_1m_on_vllm_by_hand():
    # a 1M prompt needs max_model_len 1M + 1, past V4-Pro's derived 1M: VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
    t = transfer("deepseek-v4-pro", M, precision="fp8", settings=_long())
    by = {g.label: g for g in t.plan.groups}
    # vLLM pads every V4 page to a multiple of 576 B: 64 x 584 = 37,376 -> 37,440; 64 x 132 (fp8 indexer) = 8,448
    # -> 8,640; 2 x 584 = 1,168 -> 1,728; a compressor state page 32,768 -> 32,832
    comp = by["c128_entries + c4_entries + c4_indexer"]
    assert comp.units == M // 256 and comp.unit_bytes == 30 * 37_440 + 30 * 8_640 + 31 * 1_728
    # the 128-token window in blocks of 64: (2^20 - 127) // 64 = 16,382 of 16,384 are before it, 2 move
    windows = [g for g in t.plan.groups if g.label == "window"]
    assert sorted((g.units, g.unit_bytes) for g in windows) == [(2, 30 * 37_440), (2, 31 * 37_440)]
    # compressor state: c128 blocks of 8 with a 128 window -> 16; c4 blocks of 4 with an 8 window -> 2
    assert (by["c128_state"].units, by["c128_state"].unit_bytes) == (16, 31 * 32_832)
    assert (by["c4_state + c4_indexer_state"].units, by["c4_state + c4_indexer_state"].unit_bytes) == \
        (2, 30 * (32_832 + 8_640))
    assert t.transfer_bytes == 5_905_065_600


def _long():
    from kvcalc.engines import get_engine

    return get_engine("vllm").settings({"allow_long_max_model_len": True})


def test_vllm_refuses_a_prompt_of_max_model_len(cli):
    # input_processor.py _validate_prompt_len: a prompt of max_model_len tokens leaves no room for the one output
    # token; Llama-3.1-8B's derived max_model_len is 131,072, so the longest prompt is 131,071
    for tokens in (131072, 200_000):
        with pytest.raises(KvcalcError, match=r"^context: vLLM 0\.33\.0 rejects a prompt of [\d,]+ tokens for "
                           r"llama-3\.1-8b: the prompt plus at least one output token must fit in max_model_len, so "
                           r"with the 131,072 it derives the longest prompt it takes is 131,071 "
                           r"\(allow_long_max_model_len lets the context past 131,072\)$"):
            transfer("llama-3.1-8b", tokens)
    # 131,071 tokens: cdiv(131,071, 16) = 8,192 blocks (the block counts follow the prompt alone)
    assert [g.units for g in transfer("llama-3.1-8b", 131071).plan.groups] == [8192]
    # with the override vLLM serves max_model_len 131,073 and takes the 131,072-token prompt: 131,072 / 16 blocks
    t = transfer("llama-3.1-8b", 131072, settings=_long())
    assert [g.units for g in t.plan.groups] == [8192] and t.transfer_bytes == 8192 * 16 * LLAMA_TOKEN
    r = cli("transfer", "llama-3.1-8b", "-c", "131072")
    assert r.code == 2 and r.err.count("\n") == 1 and r.err.startswith("kvcalc: error: --context: vLLM")
    assert "131,071" in r.err and "--allow-long-max-model-len" in r.err and "{{" not in r.err
    # SGLang (managers/tp_worker.py, managers/utils.py): max_req_input_len = context_len - 1 - 5, and a prompt of
    # that many tokens or more is refused: the longest is 131,072 - 7 = 131,065
    with pytest.raises(KvcalcError, match=r"the longest prompt it takes is 131,065 "):
        transfer("llama-3.1-8b", 131066, engine="sglang")
    assert transfer("llama-3.1-8b", 131065, engine="sglang").plan.groups[0].units == 131065  # pages of 1 token
    assert transfer("llama-3.1-8b", 131072, engine="exact").transfer_bytes == 131072 * LLAMA_TOKEN
    r = cli("transfer", "llama-3.1-8b", "-c", "131072", "--allow-long-max-model-len", "--json")
    assert r.code == 0 and r.json()["transfer_bytes"] == 8192 * 16 * LLAMA_TOKEN


def test_vllm_notes_the_conv_state_layout_for_mamba_hybrids():
    # nixl/base_worker.py asserts is_conv_state_dim_first() for a model with Mamba state (default layout "SD")
    note = "VLLM_SSM_CONV_STATE_LAYOUT=DS"
    assert any(note in n for n in transfer("qwen3-next-80b-a3b", 8192).plan.notes)
    assert not any(note in n for n in transfer("llama-3.1-8b", 8192).plan.notes)


def test_tensor_parallel_ranks_each_read_their_share():
    one = transfer("deepseek-v3.2", 131072, precision="fp8")
    eight = transfer("deepseek-v3.2", 131072, precision="fp8", tp=8)
    # the MLA latent is replicated: each of 8 decode ranks reads a whole copy; 2,048 blocks x 61 layers x 64 x
    # (656 + 132) B
    assert one.transfer_bytes == eight.transfer_bytes == 2048 * 61 * 64 * (656 + 132)
    assert eight.wire_bytes == 8 * eight.transfer_bytes
    # GQA heads split over the ranks: each reads half
    assert transfer("llama-3.1-8b", 8192, tp=2).transfer_bytes * 2 == transfer("llama-3.1-8b", 8192).transfer_bytes


def test_links_and_bandwidths():
    t = transfer("llama-3.1-8b", 8192, link="ib-ndr")
    assert t.link.bytes_per_s == 50_000_000_000 and t.transfer_seconds == pytest.approx(8192 * LLAMA_TOKEN / 50e9)
    # NVLink 4 is 900 GB/s both ways together: 450 GB/s one way
    assert transfer("llama-3.1-8b", 8192, link="nvlink4").link.bytes_per_s == 450_000_000_000
    # PCIe 5.0 x16: 32 GT/s x 16 lanes x 128/130 / 8 bits
    assert transfer("llama-3.1-8b", 8192, link="pcie5-x16").link.bytes_per_s == 32_000_000_000 * 16 * 128 // 130 // 8
    assert transfer("llama-3.1-8b", 8192, bandwidth=100).transfer_seconds == pytest.approx(8192 * LLAMA_TOKEN / 1e11)
    for kw in (dict(link="ib-ndx"), dict(bandwidth=0), dict(bandwidth=True), dict(link="ib-ndr", bandwidth=50),
               dict(bandwidth=1e-300), dict(bandwidth=float("nan")), dict(bandwidth=float("inf"))):
        with pytest.raises(KvcalcError):
            transfer("llama-3.1-8b", 8192, **kw)


def test_v4_on_sglang_by_hand():
    t = transfer("deepseek-v4-flash", 8300, engine="sglang", precision="fp8")
    entries, swa, c128 = t.plan.groups
    # compressed pages by the request's ceil(8,300 / 256) = 33 full pages: 21 c4 layers' pages of 64 x 584 B
    # (37,376 -> 37,440, rounded up to 576 B) and of 64 indexer keys x 132 B, 20 c128 layers' pages of 2 x 584 B
    # (1,168 -> 1,728)
    assert (entries.units, entries.unit_bytes) == (33, 21 * (37_440 + 64 * 132) + 20 * 1_728)
    # SWA pages from floor((8,300 - 128) / 256) x 256 = 7,936: 2 pages, each every layer's 256 x 584 B page
    # (149,760) and each c4 layer's two 8-row fp32 rings (4 x 512 and 4 x 128 values a row)
    assert (swa.units, swa.unit_bytes) == (2, 43 * 149_760 + 21 * 8 * (4 * 512 + 4 * 128) * 4)
    # 8,300 % 128 = 108 tokens pend: each c128 layer's 128-row ring of 2 x 512 fp32 values
    assert (c128.units, c128.unit_bytes) == (1, 20 * 128 * 2 * 512 * 4)
    assert t.transfer_bytes == 33 * entries.unit_bytes + 2 * swa.unit_bytes + c128.unit_bytes + 1600
    # at a 128-token boundary nothing pends
    assert transfer("deepseek-v4-flash", 8192, engine="sglang", precision="fp8").plan.groups[2].units == 0


def test_refusals_and_cli(cli):
    r = cli("transfer", "llama-3.1-8b", "-c", "8001", "--link", "ib-ndr", "--json")
    assert r.code == 0
    j = r.json()
    assert j["transfer_bytes"] == 501 * 16 * LLAMA_TOKEN and j["transfer_seconds"] == pytest.approx(
        501 * 16 * LLAMA_TOKEN / 50e9)
    r = cli("transfer", "llama-3.1-8b", "--link", "nvlink9")
    assert r.code == 2 and r.err.startswith("kvcalc: error: --link") and r.err.count("\n") == 1
    r = cli("transfer", "deepseek-v4-pro", "--engine", "sglang", "-c", "1M", "--json")
    assert r.code == 2 and "1,048,569" in r.err and "--allow-overwrite-longer-context-len" in r.err
    r = cli("transfer", "deepseek-v4-pro", "--engine", "sglang", "-c", "1M", "--allow-overwrite-longer-context-len",
            "--json")
    assert r.code == 0 and [g["units"] for g in r.json()["groups"]] == [4096, 1, 0]
    r = cli("transfer", "llama-3.1-8b", "--tp", "3")
    assert r.code == 2 and "--tp" in r.err and r.err.count("\n") == 1
    r = cli("transfer", "gpt-oss-120b", "--engine", "sglang", "--page-size", "16", "-c", "8k")
    assert r.code == 0 and "512 pages" in r.out and "metadata" in r.out
    r = cli("transfer", "llama-3.1-8b", "--page-size", "16")
    assert r.code == 2 and "--page-size" in r.err


def test_sglang_v4_holds_and_reserves_its_fp8_layout_when_no_precision_is_asked():
    # SGLang stores DeepSeek V4 in fp8 whatever the config's default (bf16), its c4 indexer keys at 132 B (128 fp8 +
    # an fp32 scale: get_dsv4_indexer_bytes_per_token), not the precision's 68 B fp4 keys
    default = transfer("deepseek-v4-pro", 8300, engine="sglang")
    fp8 = transfer("deepseek-v4-pro", 8300, engine="sglang", precision="fp8")
    assert default.precision == "fp8" and default.stored_bytes == fp8.stored_bytes
    # held, by hand, V4-Pro's 30 c4a and 31 c128a layers at 8,300 tokens: each a 128-entry window of 584 B; a c4a
    # layer 8,300 // 4 = 2,075 entries of 584 B and indexer keys of 132 B, its compressor states (8 x 2 x 2 x 512 +
    # 8 x 2 x 2 x 128 fp32); a c128a layer 8,300 // 128 = 64 entries and a 128 x 2 x 1 x 512 fp32 state
    c4 = 128 * 584 + 2075 * (584 + 132) + (8 * 2 * 2 * 512 + 8 * 2 * 2 * 128) * 4
    c128 = 128 * 584 + 64 * 584 + 128 * 2 * 512 * 4
    assert default.stored_bytes == 30 * c4 + 31 * c128 == 69_000_056
    # the reserve: what the request takes in DeepSeekV4TokenToKVPool. ceil(8,300 / 256) = 33 full pages, each every
    # c4 layer's page of 64 entries (64 x 584 = 37,376 -> 37,440, rounded up to 576 B) and of 64 indexer keys, every
    # c128 layer's page of 2 (1,168 -> 1,728); the SWA pages of min(8,300, 128 + 128 (eviction interval) + 2 x 256)
    # = 768 tokens (compute_swa_request_cap): 3, each every layer's 256 x 584 B page (149,760) and each c4 layer's two
    # 8-row rings (4 x 512 and 4 x 128 fp32 values a row); one c128 request slot, each c128 layer's 128-row ring of
    # 2 x 512 fp32 values
    full = 30 * (37_440 + 64 * 132) + 31 * 1_728
    swa = 61 * 149_760 + 30 * 8 * (4 * 512 + 4 * 128) * 4
    slot = 31 * 128 * 2 * 512 * 4
    assert default.reserved_bytes == 33 * full + 3 * swa + slot == 98_228_672 >= default.stored_bytes
    assert default.plan.reserved_as == "reserves" and default.to_json()["reserved_as"] == "reserves"
    # a one-token request takes a page of each pool and its c128 slot, no less than what it holds; the pool's price
    # per full token (_get_bytes_per_full_token: 0.1 x an SWA slot in 61 layers (149,760 / 256 B) with the c4 rings
    # priced per slot (8 / 256 x 2,560 fp32 x 30), + 30 x (585 / 4 + 132 / 4) + 31 x 864 / 128 = 10,115.25 B) for
    # its one page would be less than it holds
    one = transfer("deepseek-v4-pro", 1, engine="sglang")
    assert one.reserved_bytes == full + swa + slot and one.reserved_bytes >= one.stored_bytes
    price = 0.1 * (61 * 149_760 / 256 + 8 / 256 * 2560 * 4 * 30) + 30 * (585 / 4 + 132 / 4) + 31 * 864 / 128
    assert price == 10_115.25 and 256 * price < one.stored_bytes


def test_the_gpu_sets_the_layout_the_connector_moves(cli):
    """The GPU's architecture picks the kernels, and so the block / page size and the row format moved."""
    mla = 61 * 1152  # DeepSeek-V3 bf16: 61 layers x a 576-element bf16 latent row
    hopper, blackwell = transfer("deepseek-v3", 8192), transfer("deepseek-v3", 8192, gpu="b200")
    # Hopper bf16: FLASH_ATTN_MLA, blocks of 16 -> 512 blocks; Blackwell: FlashInfer MLA, blocks of 32 -> 256
    assert [(g.units, g.unit_bytes) for g in hopper.plan.groups] == [(512, 16 * mla)]
    assert [(g.units, g.unit_bytes) for g in blackwell.plan.groups] == [(256, 32 * mla)]
    assert (hopper.gpu, hopper.arch, blackwell.gpu, blackwell.arch) == (None, None, "b200", "sm100")
    # SGLang on Blackwell: V3.2's DSA cache is fp8 by default with the raw 576 B latent row (+ the 132 B fp8
    # indexer row), pages of 64: 128 pages a rank at tp 8, plus the 1,600 B metadata row
    s = transfer("deepseek-v3.2", 8192, engine="sglang", gpu="b200", tp=8)
    assert s.precision == "fp8" and s.transfer_bytes == 128 * 64 * 61 * (576 + 132) + 1600 == 353_797_696
    # trtllm_mha on Blackwell keeps a page of 16/32/64/128 and takes 64 for any other
    r = cli("transfer", "llama-3.1-8b", "--engine", "sglang", "--gpu", "b200", "--page-size", "100", "--json")
    assert r.code == 0, r.err
    j = r.json()
    assert (j["gpu"], j["arch"], j["groups"][0]["unit_tokens"], j["groups"][0]["units"]) == ("b200", "sm100", 64, 128)
    assert j["cache_bytes"] == 128 * 64 * LLAMA_TOKEN
    r = cli("transfer", "deepseek-v3", "--gpu", "b200")
    assert r.code == 0 and "on b200 (sm100)" in r.out and "kernels on sm100" in " ".join(r.out.split())
    assert "on Hopper take them: no GPU named" in " ".join(cli("transfer", "deepseek-v3").out.split())
    # refused where the engine is: no V4 kernel on Ada, an unknown GPU named
    r = cli("transfer", "deepseek-v4-flash", "--gpu", "l40s")
    assert r.code == 2 and "sm89 has none" in r.err and "Traceback" not in r.err
    r = cli("transfer", "llama-3.1-8b", "--gpu", "h9000")
    assert r.code == 2 and r.err.startswith("kvcalc: error: --gpu: unknown accelerator 'h9000'")
    with pytest.raises(KvcalcError, match="gpu: expected a GPU name"):
        transfer("llama-3.1-8b", 8192, gpu=3)


def test_settings_that_carry_an_architecture_are_named_in_the_basis(capsys):
    # through the API the settings may name the architecture without a catalogue GPU: the text says sm100's
    # kernels set the 32-token blocks (FlashInfer MLA), not Hopper's
    from kvcalc.engines import vllm as V
    from kvcalc.present.transfer import render_transfer
    from kvcalc.cli.app import console

    t = transfer("deepseek-v3", 4096, settings=V.Settings(arch="sm100"))
    assert (t.gpu, t.arch, t.plan.groups[0].unit_tokens, t.plan.groups[0].units) == (None, "sm100", 32, 4096 // 32)
    render_transfer(console(), t)
    out = " ".join(capsys.readouterr().out.split())
    assert "decode on vLLM 0.33.0 on sm100:" in out and "kernels on sm100 take them" in out and "no GPU named" not in out


def test_qwen3_next_without_prefix_caching_moves_blocks_of_another_size(cli):
    """vLLM with prefix caching off plans Qwen3-Next with mamba_cache_mode "none" (model_executor/models/config.py
    MambaModelConfig.verify_and_update_config), so platforms/interface.py _align_hybrid_block_size no longer takes
    the lcm with the gated DeltaNet's 64-token prefill checkpoints: the attention block grows in steps of 16
    (FlashAttention's MultipleOf(16)) instead of 64, and every state group holds 1 block, not 2 + 1."""
    attn = 2 * 256 * 2 * 2  # one full-attention layer's token: 2 KV heads x 256 x (K, V) x bf16 = 2,048 B
    # a gated DeltaNet layer's state: conv (4 - 1) x (2 x 16 x 128 + 32 x 128) x 2 B + recurrent 32 x 128 x 128 x 2 B
    state = 3 * (2 * 16 * 128 + 32 * 128) * 2 + 32 * 128 * 128 * 2
    assert state == 1_097_728
    on_block = 64 * -(-state // (64 * attn))  # 64 x cdiv(1,097,728, 131,072) = 64 x 9 = 576
    off_block = 16 * -(-state // (16 * attn))  # 16 x cdiv(1,097,728, 32,768) = 16 x 34 = 544
    assert (on_block, off_block) == (576, 544)
    runs = {}
    for flag in ("--prefix-caching", "--no-prefix-caching"):
        r = cli("transfer", "qwen3-next-80b-a3b", "-c", "8192", flag, "--json")
        assert r.code == 0, r.err
        runs[flag] = r.json()
    on, off = runs["--prefix-caching"], runs["--no-prefix-caching"]
    # the prefiller computes 8,191 tokens (the decoder the last): cdiv(8,191, 576) = 15 blocks, cdiv(8,191, 544) = 16,
    # each of the 12 full-attention layers' pages; each of 3 state groups (12 layers) one running-state slot, real bytes
    for j, block, blocks in ((on, 576, 15), (off, 544, 16)):
        assert [(g["kind"], g["units"], g["unit_tokens"], g["unit_bytes"]) for g in j["groups"]] == \
            [("state", 1, 0, 12 * state)] * 3 + [("full", blocks, block, 12 * block * attn)]
        assert j["transfer_bytes"] == 3 * 12 * state + blocks * 12 * block * attn
    assert (on["transfer_bytes"], off["transfer_bytes"]) == (251_854_848, 253_427_712)
    # the request's reserve: cdiv(8,192, block) full blocks + 3 state groups x (2 running + 1 checkpoint | 1) blocks,
    # each block of the widest group (12 layers x block x 2,048 B)
    assert on["reserved_bytes"] == (15 + 3 * 3) * 12 * 576 * attn
    assert off["reserved_bytes"] == (16 + 3 * 1) * 12 * 544 * attn
    # the API takes the same setting
    from kvcalc.engines import get_engine

    t = transfer("qwen3-next-80b-a3b", 8192, settings=get_engine("vllm").settings({"prefix_caching": False}))
    assert t.transfer_bytes == off["transfer_bytes"] and t.reserved_bytes == off["reserved_bytes"]


def test_transfer_takes_the_engine_settings_that_shape_it(cli):
    # Triton's GDN prefill exports no 64-token checkpoints: with prefix caching on the block is 544 again and the
    # state groups hold 2 running blocks each
    r = cli("transfer", "qwen3-next-80b-a3b", "-c", "8192", "--gdn-prefill-backend", "triton", "--json")
    assert r.code == 0 and r.json()["groups"][-1]["unit_tokens"] == 544
    assert r.json()["reserved_bytes"] == (16 + 3 * 2) * 12 * 544 * 2048
    # the in-flight tokens set a sliding-window group's reserve (not what moves): at 32k gpt-oss-120b's 18 window-128
    # layers admit cdiv(127 + in-flight, 16) + 1 blocks (SlidingWindowSpec.max_admission_blocks_per_request), the 18
    # full layers cdiv(32,768, 16) = 2,048; a block is 18 layers x 16 tokens x 8 heads x 64 x (K, V) x 2 B
    block = 18 * 16 * 8 * 64 * 2 * 2
    for args, in_flight in (((), 2 * 8192), (("--no-async-scheduling", "--max-num-batched-tokens", "1024"), 1024)):
        j = cli("transfer", "gpt-oss-120b", "-c", "32k", *args, "--json").json()
        assert j["reserved_bytes"] == (2048 + -(-(127 + in_flight) // 16) + 1) * block
        # the blocks moved do not depend on them: 2,048 full, and 2,048 - (32,768 - 127) // 16 = 8 of the window
        assert j["transfer_bytes"] == (2048 + 8) * block
    # SGLang's prefill server refuses a chunked_prefill_size its page size does not divide (arg_groups/
    # validation_hook.py; disaggregation's decode side skips the check, the prefill side does not)
    r = cli("transfer", "llama-3.1-8b", "--engine", "sglang", "--page-size", "48")
    assert r.code == 2 and r.err.count("\n") == 1 and "chunked_prefill_size must be divisible" in r.err
    r = cli("transfer", "llama-3.1-8b", "--engine", "sglang", "--page-size", "48", "--chunked-prefill-size", "4800",
            "-c", "8000", "--json")
    assert r.code == 0 and r.json()["groups"][0]["units"] == -(-8000 // 48)
    # another engine's setting: one line naming the flag
    r = cli("transfer", "llama-3.1-8b", "--engine", "sglang", "--no-prefix-caching")
    assert r.code == 2 and r.err.count("\n") == 1 and r.err.startswith("kvcalc: error: --prefix-caching: a setting "
                                                                      "of the vllm engine")
    r = cli("transfer", "llama-3.1-8b", "--max-num-seqs", "0")
    assert r.code == 2 and r.err.count("\n") == 1 and "--max-num-seqs" in r.err


def test_glm5_holds_what_the_engines_store_and_reserves_no_less(cli):
    """The issue's case: GLM-5 (78 DSA layers) at bf16 keeps a 576-wide bf16 latent (1,152 B) a token, but vLLM and
    SGLang keep its indexer keys in fp8 with an fp32 scale per 128 (132 B), not the precision's bf16 (256 B): vLLM's
    v1/attention/backends/mla/indexer.py (DSA_INDEXER_KV_DTYPES, "auto" is fp8), SGLang's index_key_cache.py."""
    layers, tokens = 78, 8193
    held = layers * tokens * (1152 + 132)
    # 64-token blocks (FlashMLA sparse's and the indexer's [64]) / SGLang's DSA pages of 64: cdiv(8,193, 64) = 129
    reserved = 129 * 64 * layers * (1152 + 132)
    for engine in ("vllm", "sglang"):
        j = cli("transfer", "glm-5", "-c", str(tokens), "--engine", engine, "--json").json()
        assert (j["stored_bytes"], j["reserved_bytes"]) == (held, reserved) == (820_545_336, 826_854_912)
        assert any("stores indexer as fp8_indexer (132 B), not the precision's bf16 (256 B)" in n for n in j["notes"])
    # the exact engine stores the precision's formats: the 256 B bf16 keys, and reserves what it holds
    j = cli("transfer", "glm-5", "-c", str(tokens), "--engine", "exact", "--json").json()
    assert j["stored_bytes"] == j["reserved_bytes"] == layers * tokens * (1152 + 256) == 899_788_032
    r = cli("transfer", "glm-5", "-c", str(tokens))
    assert "holds 782.53 MiB exactly and reserves 788.55 MiB" in " ".join(r.out.split())
    # with vLLM's mxfp4 indexer the keys are 68 B (64 fp4 + 4 ue8m0 scales)
    j = cli("transfer", "glm-5", "-c", str(tokens), "--indexer-dtype", "mxfp4", "--json").json()
    assert (j["stored_bytes"], j["reserved_bytes"]) == (layers * tokens * (1152 + 68), 129 * 64 * layers * (1152 + 68))


#: capacity's engine settings that transfer does not take: each sizes the pool or the budget (how many requests fit),
#: not one request's blocks or pages, what they move or what they reserve; with a value each that the test below
#: shows changes nothing transfer reports
BUDGET_ONLY = {
    # vLLM's and SGLang's tiers below the GPU (engines/vllm/tiers.py, engines/sglang/tiers.py) size host memory only
    "vllm": {"gpu_memory_utilization": 0.5, "kv_offloading_size": 10.0, "kv_offloading_backend": "lmcache",
             "lmcache_mode": "in-process", "lmcache_chunk_size": 128, "lmcache_l1_size_gb": 10.0,
             "lmcache_max_local_cpu_size": 5.0, "lmcache_max_local_disk_size": 10.0,
             "lmcache_save_unfull_chunk": True},
    "sglang": {"mem_fraction_static": 0.5, "max_total_tokens": 100_000, "mamba_full_memory_ratio": 2.0,
               "max_running_requests": 64, "swa_full_tokens_ratio": 0.5, "enable_dp_attention": True,
               "max_mamba_cache_size": 100, "enable_hierarchical_cache": True, "hicache_ratio": 3.0,
               "hicache_size": 10, "hicache_mem_layout": "layer_first", "host_memory_gib": 100.0},
    "exact": {"gpu_memory_utilization": 0.5},
    # llama-server's slot file does not depend on where the layers or the cache sit
    "llama.cpp": {"n_gpu_layers": 0, "no_kv_offload": True},
    # TensorRT-LLM: kvcalc models no transfer for it (each is refused), so every capacity setting is the budget's
    "trtllm": {"free_gpu_memory_fraction": 0.5, "tokens_per_block": 64, "max_tokens": 100_000, "max_batch_size": 8,
               "max_num_tokens": 4096, "max_seq_len": 8192, "host_cache_size": 1 << 30, "max_gpu_total_bytes": 1 << 30,
               "max_attention_window": "8192", "peak_memory_gib": 70.0, "device_memory_gib": 79.0,
               "disable_overlap_scheduler": True, "enable_block_reuse": False},
}


def test_transfer_takes_every_capacity_setting_that_shapes_it():
    from kvcalc.engines import engine_names, engine_options, get_engine

    assert set(engine_names()) == set(BUDGET_ONLY)
    for name in engine_names():
        takes = {o.name: set(o.commands) for o in engine_options(name)}
        capacity = {k for k, c in takes.items() if "capacity" in c}
        moved = {k for k, c in takes.items() if "transfer" in c}
        assert moved <= capacity and capacity - moved == set(BUDGET_ONLY[name]), name
        for model in ("deepseek-v4-pro", "deepseek-v3.2", "llama-4-scout", "qwen3-next-80b-a3b", "gpt-oss-120b"):
            try:
                base = transfer(model, 8192, engine=name).to_json()
            except KvcalcError:
                continue
            for k, v in BUDGET_ONLY[name].items():
                assert transfer(model, 8192, engine=name, settings=get_engine(name).settings({k: v})).to_json() == \
                    base, (name, model, k)
