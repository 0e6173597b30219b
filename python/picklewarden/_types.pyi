import pickle
from typing import Any, Dict, List, Optional, Tuple

class RefusedError(pickle.UnpicklingError):
    kind: Optional[str]
    category: Optional[str]
    offset: Optional[int]
    opcode: Optional[str]
    opcode_byte: Optional[int]
    limit: Optional[str]
    def __init__(self, message: str, kind: Optional[str] = ..., category: Optional[str] = ...,
                 offset: Optional[int] = ..., opcode: Optional[str] = ...,
                 opcode_byte: Optional[int] = ..., limit: Optional[str] = ...) -> None: ...

class RefusedEOFError(RefusedError, EOFError): ...
class RefusedValueError(RefusedError, ValueError): ...
class RefusedTypeError(RefusedError, TypeError): ...

def refused(message: str, kind: Optional[str] = ..., category: Optional[str] = ...,
            offset: Optional[int] = ..., opcode: Optional[str] = ...,
            opcode_byte: Optional[int] = ..., limit: Optional[str] = ...) -> RefusedError: ...

class Record:
    module: str
    name: str
    kind: str
    args: Tuple[Any, ...]
    kwargs: Optional[Dict[Any, Any]]
    state: Any
    listitems: List[Any]
    dictitems: List[Tuple[Any, Any]]
    def __init__(self, module: str, name: str, kind: str, args: Tuple[Any, ...],
                 kwargs: Optional[Dict[Any, Any]] = ...) -> None: ...

class Global:
    module: str
    name: str
    def __init__(self, module: str, name: str) -> None: ...

class Verdict:
    accepted: bool
    error: Optional[RefusedError]
    pickles: int
    def __bool__(self) -> bool: ...

class GlobalRef:
    module: str
    name: str
    allowed: bool
    offset: int

class ScanResult:
    globals: List[GlobalRef]
    error: Optional[RefusedError]
    protocol: int
    @property
    def refused(self) -> List[GlobalRef]: ...
