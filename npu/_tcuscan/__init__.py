"""TcuscanBackend: the authors' AscendC kernels (``tcuscan_ops``) behind the
backend protocol, one mixin per kernel family (the layout of ``npu._standin``).

Each family module's ``WRAPS`` / ``NOT_WRAPPED`` say which kernel each method
wraps and why the others are not wrapped (``python -m npu --coverage`` tabulates
them); what only runs with an NPU (imports, device moves, synchronisation, the
scan constants per device) is ``npu._device``."""
from __future__ import annotations

from ._base import VARIANTS, TcuscanBase
from .elementwise import ElementwiseMixin
from .moves import MovesMixin
from .scans import ScansMixin
from .segments import SegmentsMixin
from .sort_select import SortSelectMixin
from .sparse import SparseMixin

__all__ = ["TcuscanBackend", "VARIANTS"]


class TcuscanBackend(ScansMixin, SegmentsMixin, MovesMixin, SortSelectMixin, SparseMixin, ElementwiseMixin,
                     TcuscanBase):
    __doc__ = TcuscanBase.__doc__
