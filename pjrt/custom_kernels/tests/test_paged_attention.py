"""The paged-attention decode kernel (pjrt/custom_kernels/paged_attention.py) on the cpu
backend against dense float64 attention over the same tokens: blocks in shuffled order,
context lengths of 0, within a block and on block edges, grouped- and multi-query heads; a
paged cache gives what the same keys in one contiguous array give; bad block tables are
errors naming the kernel."""
import numpy as np
import pytest

from pjrt.custom_kernels import paged_attention
from pjrt.custom_kernels.calls import run_kernel
from pjrt.plugins.cpu.codegen.build import find_compiler
from stablehlo.errors import OpenHLOError

pytestmark = pytest.mark.skipif(find_compiler() is None, reason="needs a C++ compiler")

NAME = paged_attention.NAME


@pytest.fixture(scope="module", autouse=True)
def kernel():
    paged_attention.define()


def _case(rng, lens, heads, kv_heads, d=16, block_size=4, max_blocks=6):
    batch = len(lens)
    blocks = batch * max_blocks + 3
    f = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    # every sequence gets distinct blocks, in no particular order
    tables = rng.permutation(blocks)[:batch * max_blocks].reshape(batch, max_blocks)
    return (f(batch, heads, d), f(batch, kv_heads, d), f(batch, kv_heads, d),
            f(blocks, block_size, kv_heads, d), f(blocks, block_size, kv_heads, d),
            tables.astype(np.int32), np.array(lens, np.int32))


@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (8, 2), (4, 1)])
def test_matches_dense_float64_attention(heads, kv_heads):
    rng = np.random.default_rng(heads * 10 + kv_heads)
    operands = _case(rng, [0, 1, 3, 4, 5, 17, 24], heads, kv_heads)
    scale = 0.25
    got = run_kernel(NAME, *operands, scale=scale)[0]
    expected = paged_attention.reference(*operands, scale)
    assert got.shape == expected.shape == operands[0].shape
    np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-6)


def test_paged_equals_contiguous_and_only_the_context_counts():
    rng = np.random.default_rng(7)
    q, k_new, v_new, k_cache, v_cache, tables, lens = _case(rng, [10, 13], 4, 2)
    scale = 0.3
    paged = run_kernel(NAME, q, k_new, v_new, k_cache, v_cache, tables, lens, scale=scale)[0]
    # the same tokens laid out contiguously: blocks 0..5 for sequence 0, 6..11 for 1
    contiguous_k = k_cache[tables.reshape(-1)]
    contiguous_v = v_cache[tables.reshape(-1)]
    identity = np.arange(12, dtype=np.int32).reshape(2, 6)
    contiguous = run_kernel(NAME, q, k_new, v_new, contiguous_k, contiguous_v, identity, lens,
                            scale=scale)[0]
    np.testing.assert_allclose(paged, contiguous, rtol=1e-6, atol=1e-7)
    # tokens past a context length are never read: changing them changes nothing
    k_cache[tables[0, 3], 2:] = 1e6  # sequence 0's tokens 14 and 15 (context 10)
    again = run_kernel(NAME, q, k_new, v_new, k_cache, v_cache, tables, lens, scale=scale)[0]
    np.testing.assert_array_equal(again, paged)


def test_bad_block_tables_are_errors_naming_the_kernel():
    rng = np.random.default_rng(1)
    operands = list(_case(rng, [5, 2], 4, 2))
    operands[5][0, 1] = 10_000  # sequence 0's second block (tokens 4..7) is in use
    with pytest.raises(OpenHLOError, match="paged_attention_decode.*not a block of the cache"):
        run_kernel(NAME, *operands, scale=1.0)
    operands = list(_case(rng, [25, 2], 4, 2))  # 6 blocks of 4 hold 24 tokens
    with pytest.raises(OpenHLOError, match="longer than its block table"):
        run_kernel(NAME, *operands, scale=1.0)
