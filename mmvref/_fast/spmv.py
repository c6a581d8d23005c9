def spmv(*a, **k): raise NotImplementedError
