# paged: Python workers for pagedd, the shared KV-cache manager with an attention service.
# SPDX-License-Identifier: MIT
"""Python client of pagedd, the shared KV-cache manager with an attention service.

``paged.connect()`` opens a :class:`Client` (a context manager); a client creates or
attaches to pools (:meth:`Client.create_pool`, :meth:`Client.attach_pool`), whose
:meth:`Pool.append`, :meth:`Pool.decode` and :meth:`Pool.prefill` run requests through the
daemon. Tensors cross without a copy when they live in the client's arena:
:meth:`Client.empty` makes such an :class:`ArenaArray`, and decode and prefill return their
outputs as one; ``numpy.from_dlpack(a)`` (or ``torch.from_dlpack``) views the same memory.
Any other array (DLPack or the buffer protocol, C-contiguous) is accepted too and copied
into the arena for the call. On the cuda backend the data arena is device memory: tensors
are CUDA tensors (``torch.from_dlpack``), copied on the caller's CUDA stream, and a
``stream`` argument orders each request with the work on that stream. Failures of libpaged or the daemon raise a subclass of
:class:`Error`; wrong arguments raise ``TypeError`` or ``ValueError`` naming the argument.
The C reference is libpaged(3).
"""

from . import _paged
from ._paged import ArenaArray, Client, Events, Pool, Request, Sequence, hash_blocks

ALL_LAYERS = _paged.ALL_LAYERS
"""``layer`` for :meth:`Pool.append` with keys and values of every layer."""

POOL_SHARED_PREFIXES = _paged.POOL_SHARED_PREFIXES
POOL_SEALED = _paged.POOL_SEALED
POOL_EXPORTED = _paged.POOL_EXPORTED
POOL_PEERS = _paged.POOL_PEERS

__all__ = [
    "connect", "Client", "Pool", "Sequence", "ArenaArray", "Request", "Events", "ALL_LAYERS", "POOL_SHARED_PREFIXES",
    "POOL_SEALED", "POOL_EXPORTED", "POOL_PEERS", "Error", "ClosedError", "version", "hash_blocks", "error_class",
]


def version():
    """Returns the version of the libpaged the package runs on ("0.1.0")."""
    return _paged.version()


class Error(Exception):
    """A failure reported by libpaged or the daemon.

    Attributes: ``code``, the negative ``paged_error`` number; ``field``, the name of the
    request field at fault (``"block_tables"``, ``"layer"``) or None; ``message``,
    libpaged's sentence, such as "decode: block_tables[3]: block not held by this client".
    """

    def __init__(self, code, field, message):
        super().__init__(message)
        self.code = code
        self.field = field
        self.message = message


class ClosedError(ValueError):
    """A call on a client, pool or sequence that was closed or detached."""


# (code, class name, what it means): one subclass of Error per paged_error code.
_CODES = [
    (-1, "InvalidArgumentError", "An argument is invalid (the field names it)."),
    (-2, "NoMemoryError", "Out of memory: host, device, or room in the client's arena."),
    (-3, "NoSpaceError", "No free blocks left in the pool."),
    (-4, "NotFoundError", "No such pool."),
    (-5, "ExistsError", "A pool of that name already exists."),
    (-6, "PermissionDeniedError", "The pool's or the socket's owner and mode do not allow it."),
    (-7, "ProtocolError", "A malformed protocol message."),
    (-8, "VersionError", "The client and the daemon speak different protocol versions."),
    (-9, "OpcodeError", "An unknown request opcode."),
    (-10, "LayerError", "A layer index outside the pool."),
    (-11, "RangeError", "An offset or length outside the client's arena."),
    (-12, "BlockError", "A block id outside the pool."),
    (-13, "NotHeldError", "A block not held by this client."),
    (-14, "ReadOnlyError", "A write to a block that is shared, published or read-only."),
    (-15, "SeqLenError", "A sequence longer than its block table covers."),
    (-16, "HeadsError", "Query heads that are not a multiple of the pool's KV heads."),
    (-17, "DtypeError", "A dtype that does not match the pool or is not supported."),
    (-18, "GeometryError", "An invalid or unsupported pool geometry field."),
    (-19, "RingError", "The client's ring indices are corrupt."),
    (-20, "ShutdownError", "The daemon is shutting down."),
    (-21, "DisconnectedError", "The connection to the daemon is gone."),
    (-22, "TimedOutError", "A wait timed out."),
    (-23, "AgainError", "The submission ring is full."),
    (-24, "LimitError", "A daemon limit (clients, pools, blocks per client) was reached."),
    (-25, "DeviceError", "The device or a kernel failed."),
    (-26, "SystemCallError", "A system call failed."),
    (-27, "NotSupportedError", "Not supported by this daemon, backend or package."),
    (-28, "BusyError", "Reserved: no call raises it."),
    (-29, "NotConnectedError", "No daemon is listening on the socket."),
    (-30, "OtherDeviceError", "The pool is on another device than the client's data arena."),
]

_BY_CODE = {}
for _code, _name, _doc in _CODES:
    _bases = (Error, TimeoutError) if _code == -22 else (Error,)
    _cls = type(_name, _bases, {"__doc__": _doc + " (paged_error %d)" % _code, "__module__": __name__})
    globals()[_name] = _cls
    _BY_CODE[_code] = _cls
    __all__.append(_name)
del _code, _name, _doc, _cls, _bases


def error_class(code):
    """Returns the subclass of :class:`Error` raised for a ``paged_error`` code."""
    return _BY_CODE.get(code, Error)


def _make_error(code, field, message):
    """Makes the exception the C module raises: ClosedError for code None, else the code's class."""
    if code is None:
        return ClosedError(message)
    return error_class(code)(code, field, message)


_paged._set_error_factory(_make_error)


def connect(socket=None, name=None, *, host_arena_size=0, timeout_ms=0, spin_us=0, sq_entries=0,
            data_arena_size=0, device=0):
    """Connects to pagedd and returns a :class:`Client`, to use as a context manager.

    ``socket`` is the daemon's socket path (None: ``$PAGED_SOCKET``, else
    ``$XDG_RUNTIME_DIR/paged/pagedd.sock``, else ``/run/paged/pagedd.sock``); ``name`` is
    shown by pactl (None: the program's name). ``host_arena_size`` (bytes, 0: 64 MiB),
    ``data_arena_size`` (the device arena on the cuda backend, bytes, 0: 256 MiB),
    ``timeout_ms`` (control calls, 0: 10 s), ``spin_us`` and ``sq_entries`` are
    paged_client_connect(3)'s options. ``device`` is the daemon's device (its number, as
    ``pactl devices`` lists them) that holds the client's data arena: its append, decode and
    prefill name pools of that device (paged(7), SEVERAL GPUS). Raises NotConnectedError when
    no daemon listens.
    """
    return Client(socket, name, host_arena_size=host_arena_size, timeout_ms=timeout_ms,
                  spin_us=spin_us, sq_entries=sq_entries, data_arena_size=data_arena_size, device=device)
