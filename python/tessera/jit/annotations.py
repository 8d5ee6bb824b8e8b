"""torch.jit.annotations: the typing names TorchScript code imports from here"""
from typing import (Any, Callable, Dict, List, Optional, Tuple, Union)  # noqa: F401
from typing import Final  # noqa: F401

BroadcastingList1 = BroadcastingList2 = BroadcastingList3 = List
