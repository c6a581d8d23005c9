"""mmvref.dask on a distributed.LocalCluster of 2 worker processes (issue 18, point 2): the chunks' tasks
run in other processes (the carries and the overflow verdict travel between them pickled), over random
chunkings, against the plain-loop oracles and the single-machine ops. Fewer examples than on the
synchronous scheduler (test_dask.py): each one is a round trip through the scheduler."""
from __future__ import annotations

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
import dask.array as da  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import mmvref  # noqa: E402
import mmvref.dask as md  # noqa: E402
from tests.oracle import (  # noqa: E402
    oracle_compress,
    oracle_scan,
    oracle_segment_sum_csr,
    oracle_segmented_scan,
    oracle_segmented_sum,
)
from tests.test_dask import RESULT, _d, check_int, csr_case, segmented_case  # noqa: E402

pytestmark = pytest.mark.native_only


@pytest.fixture(scope="module")
def client():
    # processes=True: two worker processes, one thread each; the workers keep Numba's threads to one
    # so that the two processes share this machine's cores instead of oversubscribing them
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  env={"NUMBA_NUM_THREADS": "1"}, silence_logs=40) as cluster:
        with distributed.Client(cluster) as c:
            yield c


@settings(max_examples=15, deadline=None)
@given(segmented_case(dtypes=("int8", "int32", "int64")), st.booleans(), st.sampled_from(["raise", "wrap"]))
def test_scans_on_two_processes(client, case, exclusive, overflow):
    x, f, chunks = case
    rdt = np.dtype(RESULT[x.dtype.name])
    dx, df = _d(x, chunks), _d(f, chunks)
    check_int(lambda: md.scan(dx, exclusive=exclusive, overflow=overflow),
              lambda: mmvref.scan(x, exclusive=exclusive, overflow=overflow), oracle_scan(x, exclusive), rdt, overflow)
    check_int(lambda: md.segmented_scan(dx, df, exclusive=exclusive, overflow=overflow),
              lambda: mmvref.segmented_scan(x, f, exclusive=exclusive, overflow=overflow),
              oracle_segmented_scan(x, f, exclusive), rdt, overflow)


@settings(max_examples=15, deadline=None)
@given(segmented_case(dtypes=("int16", "int32", "int64")), st.sampled_from(["raise", "wrap"]))
def test_segmented_sum_and_compress_on_two_processes(client, case, overflow):
    x, f, chunks = case
    rdt = np.dtype(RESULT[x.dtype.name])
    dx, df = _d(x, chunks), _d(f, chunks)
    check_int(lambda: md.segmented_sum(dx, df, overflow=overflow),
              lambda: mmvref.segmented_sum(x, f, overflow=overflow), oracle_segmented_sum(x, f), rdt, overflow)
    np.testing.assert_array_equal(md.compress(dx, df).compute(), np.array(oracle_compress(x, f), x.dtype))


@settings(max_examples=10, deadline=None)
@given(csr_case(dtypes=("int8", "int32", "int64")), st.sampled_from(["raise", "wrap"]))
def test_segment_sum_csr_on_two_processes(client, case, overflow):
    x, indptr, chunks = case
    rdt = np.dtype(RESULT[x.dtype.name])
    check_int(lambda: md.segment_sum_csr(_d(x, chunks), indptr, overflow=overflow),
              lambda: mmvref.segment_sum_csr(x, indptr, overflow=overflow),
              oracle_segment_sum_csr(x, indptr), rdt, overflow)


def test_fixed_cases_on_two_processes(client):
    """Every op once on a cluster, with the chunks placed on both workers; the spmv x is one key."""
    rng = np.random.default_rng(5)
    n = 10_000
    x = rng.integers(-50, 50, n).astype(np.int32)
    f = (rng.random(n) < 0.01).astype(np.uint8)
    dx, df = da.from_array(x, chunks=997), da.from_array(f, chunks=997)
    z = md.scan(dx).persist()
    distributed.wait(z)
    holders = {w for ws in client.who_has(z).values() for w in ws}
    assert len(holders) == 2, f"the chunks' tasks ran on {holders}, expected both workers"
    np.testing.assert_array_equal(z.compute(), mmvref.scan(x))
    np.testing.assert_array_equal(md.segmented_sum(dx, df).compute(), mmvref.segmented_sum(x, f))
    X = x.reshape(10, 1000)
    np.testing.assert_array_equal(md.batched_scan(da.from_array(X, chunks=(3, 250))).compute(),
                                  mmvref.batched_scan(X))
    import scipy.sparse as sp

    A = sp.random(300, 200, 0.05, format="csr", random_state=2)
    v = rng.random(200)
    np.testing.assert_allclose(md.spmv(A, da.from_array(v, chunks=50), row_chunks=4).compute(), A @ v, rtol=1e-12)
    with pytest.raises(OverflowError, match="overflows int32"):
        md.scan(da.from_array(np.full(100, 2**30, np.int32), chunks=7)).compute()
