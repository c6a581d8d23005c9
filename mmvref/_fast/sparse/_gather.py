"""How the SpMV kernels read x[indices]: the ``Gather`` marker whose Numba type (``GatherKind``)
carries the choice (LLVM's generic masked gather, or the AVX2 path's hardware gathers of
``_avx2``), so each kind compiles once and Numba's cache keeps each kind's machine code apart.
Shared by ``_portable_spmv`` and ``_avx2`` (neither imports the other's marker from it)."""
from __future__ import annotations

from llvmlite import ir
from numba.core import types as nbtypes
from numba.extending import NativeValue, models, register_model, typeof_impl, unbox


class GatherKind(nbtypes.Type):
    """Numba type of a ``Gather`` marker: which instructions read x[indices]."""

    def __init__(self, isa):
        self.isa = isa
        super().__init__(name=f"GatherKind({isa})")


class Gather:
    """Marker passed to the float kernels to choose how x[indices] is read. Its Numba
    type (``GatherKind``) carries the choice, so the kernels compile once per kind
    and Numba's cache keeps each kind's machine code apart."""

    __slots__ = ("isa", "_numba_type_")

    def __init__(self, isa: str):
        self.isa = isa
        # Numba's dispatcher reads ``_numba_type_`` in C when it types a call's arguments; a value
        # without it goes back to the interpreter (``typeof`` and this type's constructor) on
        # every call: 3.9 us a call, most of a 1,000-row matrix's prepared product (6.0 us)
        self._numba_type_ = GatherKind(isa)

    def __reduce__(self):
        return Gather, (self.isa,)

    def __repr__(self):
        return f"Gather({self.isa!r})"


register_model(GatherKind)(models.OpaqueModel)


@typeof_impl.register(Gather)
def _typeof_gather(val, c):
    return GatherKind(val.isa)


@unbox(GatherKind)
def _unbox_gather(typ, obj, c):
    return NativeValue(c.context.get_dummy_value())  # the type is the information


def _elem_bytes(t):
    if isinstance(t, ir.IntType):
        return t.width // 8
    return 4 if isinstance(t, ir.FloatType) else 8
