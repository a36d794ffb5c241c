import pytest

from kvcalc.errors import KvcalcError
from kvcalc.units import format_bytes, format_tokens, parse_token_list, parse_tokens


@pytest.mark.parametrize(
    "text, tokens",
    [
        ("1M", 1_048_576),  # binary: 2**20
        ("1m", 1_048_576),
        ("128k", 131_072),
        ("128K", 131_072),
        ("1G", 1_073_741_824),
        ("1048576", 1_048_576),
        ("1_048_576", 1_048_576),
        ("1.5M", 1_572_864),  # 1.5 * 2**20
        ("0.5k", 512),
        ("1", 1),
    ],
)
def test_parse_tokens(text, tokens):
    assert parse_tokens(text) == tokens


@pytest.mark.parametrize("text", ["abc", "", "0", "-5", "1.3k", "1T", "5G", "1e6", "M", "1 M M", "1,048,576"])
def test_parse_tokens_rejects(text):
    with pytest.raises(KvcalcError) as info:
        parse_tokens(text)
    # the library names its parameter; the CLI swaps in its flag (tests/test_cli.py checks "--context")
    assert str(info.value).startswith("context: ") and info.value.param == "context"
    assert info.value.renamed({"context": "--context"}).startswith("--context: ")


def test_absurd_context_names_the_limit():
    with pytest.raises(KvcalcError, match="4,294,967,296"):
        parse_tokens("8G")
    assert parse_tokens("4G") == 4 * 2**30  # the limit itself is allowed


def test_token_list():
    assert parse_token_list(["128k,1M", "2M"]) == [131_072, 1_048_576, 2_097_152]
    with pytest.raises(KvcalcError, match="empty"):
        parse_token_list(["1M,"])
    with pytest.raises(KvcalcError, match="ambiguous"):
        parse_token_list(["1,048,576"])  # not the contexts 1, 48 and 576


def test_format_tokens_and_bytes():
    assert format_tokens(1_048_576) == "1M"
    assert format_tokens(131_072) == "128k"
    assert format_tokens(1000) == "1000"
    assert format_bytes(1408) == "1.38 KiB"
    assert format_bytes(90_060_095_488) == "83.88 GiB"  # 83.875 GiB
    assert format_bytes(512) == "512 B"
