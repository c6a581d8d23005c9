"""Port of upstream's tests/test_scan_multi_core_no_l2.py: run_scan_multi_core_no_l2 (MCScan without the L2 split) on
n = multiplier * 20 * 16^2 (and, for S = 16, multiplier * 20 * 32^2) elements, fp16 randn -> fp32 and
int8 values 0..9 -> int32, against torch.cumsum in the output dtype within atol=1e-02; and the same case
through TcuscanBackend.scan(variant="multi_core_no_l2").

Scale: lengths above CAP keep n mod 20 * s^2 (the cores' share of whole tiles)."""
import pytest
from _upstream import NUM_AI_CORES, PYTESTMARK, backend, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 101
KERNEL, VARIANT = "run_scan_multi_core_no_l2", "multi_core_no_l2"


def get_lengths(s, max_iters):
    for multiplier in range(1, max_iters):
        yield multiplier * NUM_AI_CORES * s * s


def _check(vec_len, s, dtype):
    n = scaled(vec_len, NUM_AI_CORES * s * s)
    if dtype == torch.float16:
        x, out_dtype = torch.randn(n, generator=gen()).to(dtype), torch.float32
    else:
        x, out_dtype = torch.randint(0, 10, size=(n,), dtype=dtype, generator=gen()), torch.int32
    expected = torch.cumsum(x, dim=-1, dtype=out_dtype)
    actual = getattr(ops(), KERNEL)(x, s)
    assert actual.dtype == expected.dtype
    assert torch.allclose(actual, expected, atol=1e-02), f"multi-core scan ({dtype}) s={s}, n={n}"
    got = backend(s).scan(x.numpy(), variant=VARIANT)
    assert got.dtype == expected.numpy().dtype
    assert torch.allclose(torch.from_numpy(got), expected, atol=1e-02)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=16, max_iters=16)))
@pytest.mark.parametrize("s", [32, 64, 128])
@pytest.mark.parametrize("dtype", [torch.int8, torch.float16], ids=str)
def test_mcscan(vec_len, s, dtype):
    _check(vec_len, s, dtype)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=32, max_iters=12)))
def test_mcscan_fp16_s_16(vec_len):
    _check(vec_len, 16, torch.float16)
