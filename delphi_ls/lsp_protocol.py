"""The language server's protocol edge: framing that survives bad bytes, and an answer for every request.

pygls 2's stdio loop trusts its peer: one header that is not exactly ``Content-Length: <digits>\\r\\n``
(LF-only, non-numeric, a body shorter than announced) leaves it reading bodies glued to the next header
as header lines, deaf to everything after; ``Content-Length: 99999999999`` is a ``MemoryError``; a
request whose params fail to deserialise is dropped without a response (the client waits forever),
with a full traceback in the log; ``exit`` without ``shutdown`` leaves with status 0.

Here:

- :class:`Framer` cuts the byte stream into bodies. A header block is found by searching for the next
  ``Content-Length:`` anywhere in the stream, so junk before it is skipped (one log line) and the stream
  resynchronises. A bad or oversized length drops that header (the body is then skipped as junk), and
  a body that turns out to hold the next frame's header (the announced length was too long) is cut
  back to that header. Memory is bounded by :data:`MAX_BODY`.
- :class:`DelphiProtocol` answers every request that has an id: InvalidRequest for malformed
  messages and for anything but ``exit`` after ``shutdown``, InvalidParams naming the field when params
  do not deserialise, MethodNotFound for unknown methods. Such answers are logged as one line.
- :func:`serve_stdio` runs the two and returns the exit status: 0 after ``shutdown`` then ``exit``,
  1 for ``exit`` (or end of input) without ``shutdown``, as the LSP specification says.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import queue
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from enum import Enum
from typing import IO, TYPE_CHECKING, Any

import cattrs
from cattrs.errors import ClassValidationError
from lsprotocol import types
from pygls.constants import ATTR_EXECUTE_IN_THREAD
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcMethodNotFound,
    JsonRpcRequestCancelled,
    JsonRpcServerNotInitialized,
)
from pygls.feature_manager import is_thread_function
from pygls.io_ import StdoutWriter
from pygls.protocol import default_converter
from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage
from pygls.protocol.language_server import LanguageServerProtocol, lsp_method

from .api import jsonrpc_id
from .core import cancel

if TYPE_CHECKING:
    from collections.abc import Generator
    from concurrent.futures import Future

    from pygls.lsp.server import LanguageServer

log = logging.getLogger("delphi_ls.lsp")

MAX_BODY = 64 * 1024 * 1024  # one message; a whole-file didOpen of a large file fits many times over
MAX_HEADER = 8 * 1024  # a header block (Content-Length, Content-Type) is a few dozen bytes
IDLE_RESYNC_S = 1.0  # a body still incomplete after this much silence may have swallowed a header
CHUNK = 64 * 1024

# Where a header block starts. Searched for anywhere, so that junk before it is skipped.
_HEADER_START = re.compile(rb"content-length[ \t]*:", re.I)
# A complete Content-Length line. It cannot occur in a valid JSON body (strings hold no raw newlines),
# so finding one inside a body means the announced length ran past the message's end.
_FRAME_START = re.compile(rb"content-length[ \t]*:[ \t]*\d+[ \t]*\r?\n", re.I)
_HEADER_END = re.compile(rb"\r?\n\r?\n")
TOO_LARGE = "limit"  # how a too-large frame's reason ends (_parse_headers)
ID_PEEK = 4096  # bytes of a too-large body searched for its request id
_REQUEST_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,19}|"(?:[^"\\\n]|\\.){0,256}")')
_HEADER_LINE = re.compile(rb"([A-Za-z0-9-]+)[ \t]*:[ \t]*(.*?)[ \t]*")


class Framer:
    """Cut a stream of byte chunks into JSON messages, resynchronising after anything malformed.

    ``chunks`` yields what the peer wrote, ``b""`` at end of input. Runs on its own thread.
    """

    def __init__(self, chunks: queue.Queue[bytes], max_body: int = MAX_BODY, idle_s: float = IDLE_RESYNC_S,
                 on_not_json: Callable[[str], None] | None = None,
                 on_too_large: Callable[[int | str, str], None] | None = None) -> None:
        self.chunks = chunks
        self.max_body = max_body
        self.idle_s = idle_s
        self.buf = bytearray()
        self.eof = False
        self.skipped = 0  # bytes of junk since the last good frame (logged once, not per chunk)
        self.dropped = 0  # frames dropped so far (tests and logs)
        self.on_not_json = on_not_json  # told why, for a frame whose whole body is not JSON (answered -32700)
        # Told the request id read from the first bytes of a body over max_body, and why: the body is never
        # read, and the request that waited for an answer for ever (a hostile newcomer, session 28) gets one.
        self.on_too_large = on_too_large

    def messages(self) -> Iterator[Any]:
        while (body := self._next_body()) is not None:
            try:
                yield json.loads(body)
            except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError; nesting is not
                self.dropped += 1
                at = _resync_point(body)
                if at is not None:
                    log.warning("dropped a frame whose Content-Length (%d) ran past its end; resynchronising "
                                "at the next header", len(body))
                    self.buf[:0] = body[at:]
                else:
                    log.warning("dropped a frame of %d bytes: not JSON (%s)", len(body), _short(e))
                    if self.on_not_json is not None:
                        self.on_not_json(f"a frame of {len(body)} bytes is not JSON ({_short(e)})")
        self._report_skipped()

    def _fill(self, timeout: float | None) -> bool:
        """Wait for more bytes; False on end of input or when ``timeout`` passes first."""
        if self.eof:
            return False
        try:
            chunk = self.chunks.get(timeout=timeout)
        except queue.Empty:
            return False
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def _skip(self, n: int) -> None:
        junk = bytes(self.buf[:n])
        del self.buf[:n]
        if junk.strip():
            self.skipped += len(junk)

    def _report_skipped(self) -> None:
        if self.skipped:
            log.warning("skipped %d bytes that were not part of any frame", self.skipped)
            self.skipped = 0

    def _drop_header(self, why: str) -> None:
        """Drop the ``Content-Length:`` token just found and search again from after it."""
        self.dropped += 1
        log.warning("dropped a frame header: %s; resynchronising at the next Content-Length", why)
        del self.buf[:len(b"content-length:")]

    def _next_body(self) -> bytes | None:
        while True:
            start = _HEADER_START.search(self.buf)
            if start is None:
                # Keep a tail that could be the beginning of a header split across chunks.
                self._skip(max(len(self.buf) - len(b"content-length:"), 0))
                if not self._fill(None):
                    return None
                continue
            self._skip(start.start())
            end = _HEADER_END.search(self.buf)
            if end is None or end.start() > MAX_HEADER:
                if len(self.buf) > MAX_HEADER:
                    self._drop_header(f"no end of headers within {MAX_HEADER} bytes")
                elif not self._fill(None):
                    return None
                continue
            length, why = self._parse_headers(bytes(self.buf[:end.start()]))
            if length is None:
                if why.endswith(TOO_LARGE) and self.on_too_large is not None:
                    self._say_too_large(end.end(), why)
                self._drop_header(why)
                continue
            body_at = end.end()
            while len(self.buf) - body_at < length:
                if self._fill(self.idle_s):
                    continue
                if self.eof:
                    return None
                nxt = _FRAME_START.search(self.buf, body_at)
                if nxt is not None:  # the peer is waiting: the announced length was too long
                    self.dropped += 1
                    log.warning("dropped a frame: %d of its %d announced bytes came before the next header; "
                                "resynchronising there", nxt.start() - body_at, length)
                    del self.buf[:nxt.start()]
                    break
            else:
                body = bytes(self.buf[body_at:body_at + length])
                del self.buf[:body_at + length]
                self._report_skipped()
                return body

    def _say_too_large(self, body_at: int, why: str) -> None:
        """The id of the request whose body is too large, from its first bytes (a client writes `id` before
        `params`), waiting briefly for them; a notification (no id) is only logged."""
        deadline = time.monotonic() + min(self.idle_s, 1.0)
        while len(self.buf) - body_at < ID_PEEK and (left := deadline - time.monotonic()) > 0 and self._fill(left):
            pass
        head = bytes(self.buf[body_at:body_at + ID_PEEK])
        if (nxt := _HEADER_START.search(head)) is not None:
            head = head[:nxt.start()]  # a lying length over a small body: the next frame's id is not its
        m = _REQUEST_ID.search(head.split(b'"params"', 1)[0])
        if m is None:
            return
        raw = m.group(1)
        try:
            rid = json.loads(raw)
        except ValueError:
            return
        if isinstance(rid, int | str) and not isinstance(rid, bool) and self.on_too_large is not None:
            self.on_too_large(rid, why)

    def _parse_headers(self, head: bytes) -> tuple[int | None, str]:
        length: int | None = None
        for line in re.split(rb"\r?\n", head):
            m = _HEADER_LINE.fullmatch(line)
            if m is None:
                return None, f"malformed header line {_short(line)}"
            name, value = m.group(1).lower(), m.group(2)
            if name != b"content-length":
                continue  # Content-Type is the only other header; its charset is always utf-8 here
            if length is not None:
                return None, "two Content-Length headers"
            if not re.fullmatch(rb"\d{1,20}", value):
                return None, f"Content-Length {_short(value)} is not a byte count"
            length = int(value)
            if length > self.max_body:
                return None, f"Content-Length {length} exceeds the {self.max_body}-byte {TOO_LARGE}"
        if length is None:
            return None, "no Content-Length"
        return length, ""


def _resync_point(body: bytes) -> int | None:
    """Where the next frame's header starts inside a body that is not JSON, if it does.

    A body read with a too-long Content-Length holds the start of the next frame: its whole header
    line, or an unfinished one at the very end (even just ``C``). Pushing that part back lets the
    next frame be read; pushing back a few bytes too many costs nothing (they are skipped as junk).
    """
    if (m := _FRAME_START.search(body)) is not None:
        return m.start()
    starts = [m.start() for m in _HEADER_START.finditer(body)]
    if starts and b"\n" not in body[starts[-1]:]:
        return starts[-1]
    token = b"content-length:"
    for k in range(min(len(body), len(token) - 1), 0, -1):
        if token.startswith(body[-k:].lower()):
            return len(body) - k
    return None


def _short(x: Any, n: int = 60) -> str:
    r = repr(x)
    return r if len(r) <= n else r[:n] + "..."


def _camel(path: str) -> str:
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), path)


def _describe(exc: BaseException, type_: Any) -> str:
    if isinstance(exc, ValueError) and str(exc) and not isinstance(exc, ClassValidationError):
        return f"invalid value ({exc})"
    return cattrs.v.format_exception(exc, type_)


def describe_structure_error(exc: BaseException) -> str:
    """The failed field(s) of a params object, in the client's spelling: ``params.position.line: ...``."""
    if isinstance(exc, ClassValidationError):
        parts = []
        for msg in cattrs.transform_error(exc, path="$", format_exception=_describe):
            what, _, where = msg.rpartition(" @ ")
            where = _camel(where.removeprefix("$.").removeprefix("$"))
            parts.append(f"{where or 'message'}: {what}")
        return "; ".join(parts[:5])
    return _short(str(exc) or type(exc).__name__, 200)


def _strict(kind: type, name: str) -> Callable[[Any, Any], Any]:
    def structure(value: Any, target: Any) -> Any:
        if type(value) is kind:
            got = value
        elif kind is int and type(value) is float and value.is_integer():
            got = int(value)  # 3.0 from a client that writes every number as a float
        elif kind is float and type(value) is int:
            got = float(value)
        else:
            raise ValueError(f"expected {name}, got {_json_type(value)}")
        # The hook is found for the protocol's str and int enums too (FileChangeType, TraceValues): made the enum
        # member, so a value outside it is refused as the default converter refused it (review).
        return target(got) if target is not kind and isinstance(target, type) and issubclass(target, Enum) else got
    return structure


def _json_type(value: Any) -> str:
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array",
            dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)


def strict_converter() -> cattrs.Converter:
    """pygls' converter with the protocol's scalar types checked instead of converted.

    cattrs converts by calling the type: ``workspace/symbol`` with ``"query": 12`` searched for "12", a line
    of ``"3"`` was line 3 and ``"false"`` was true (an editor newcomer's finding, session 25). Now each is
    InvalidParams naming the field, like any other params that do not fit."""
    converter = default_converter()
    for kind, name in ((str, "a string"), (int, "an integer"), (bool, "a boolean"), (float, "a number")):
        converter.register_structure_hook(kind, _strict(kind, name))
    return converter


# LSP's RequestFailed: a right request the server cannot answer now (a damaged index being rebuilt), said in words.
REQUEST_FAILED = -32803


class DelphiProtocol(LanguageServerProtocol):
    """pygls' LSP protocol with every request answered, even malformed ones."""

    def __init__(self, server: LanguageServer, converter: cattrs.Converter) -> None:
        super().__init__(server, converter)
        self.exit_code: int | None = None
        # Set by serve_stdio: ends the serve loop with a status.
        self.on_exit: Callable[[int], None] | None = None
        # A request answered on a thread, by id: set by its `$/cancelRequest` (core/cancel.py).
        self._cancels: dict[Any, threading.Event] = {}
        self._initialize_taken = False  # an `initialize` request was read (a second is refused)

    # ------------------------------------------------------------------ cancellation
    # pygls cancels a request only before it starts; one that runs (a hover or a question waiting for the
    # catch-up, seconds) went on and answered a request the editor had dropped (a newcomer, session 36). A
    # request run on a thread runs inside core.cancel.cancellable, which the session's waits and the retrieval
    # branches check; it then ends with RequestCancelled (-32800), as the LSP asks.
    def _execute_handler(self, msg_id: Any, handler: Any, callback: Any, args: Any = None,
                         kwargs: Any = None) -> None:
        if is_thread_function(handler):
            event = self._cancels[msg_id] = threading.Event()
            inner = handler

            def handler(*a: Any, **k: Any) -> Any:
                try:
                    with cancel.cancellable(event):
                        return inner(*a, **k)
                except cancel.Cancelled:
                    raise JsonRpcRequestCancelled(f"request {msg_id!r} was cancelled") from None
                finally:
                    self._cancels.pop(msg_id, None)

            setattr(handler, ATTR_EXECUTE_IN_THREAD, True)
        super()._execute_handler(msg_id, handler, callback, args, kwargs)

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        event = self._cancels.pop(msg_id, None)  # taken out here too: one cancelled before it ran never ends
        if event is not None:
            event.set()
        super()._handle_cancel_notification(msg_id)

    # ------------------------------------------------------------------ incoming
    def handle_raw(self, raw: Any) -> None:
        """One JSON value from the wire: validate the envelope, structure it, dispatch it."""
        if not isinstance(raw, dict):
            log.warning("dropped a message: a JSON-RPC message is an object, got %s", type(raw).__name__)
            # JSON-RPC answers it with id null (LSP has no batches): the client learns why nothing came back.
            why = ("a batch (JSON array) is not part of LSP: send one message per frame" if isinstance(raw, list)
                   else f"a JSON-RPC message is an object, got {type(raw).__name__}")
            self._error(None, JsonRpcInvalidRequest.CODE, why)
            return
        method = raw.get("method")
        has_id = "id" in raw
        msg_id = raw.get("id")
        is_request = has_id and "method" in raw
        if has_id and not jsonrpc_id(msg_id) and not ("error" in raw and msg_id is None):
            return self._invalid(None, "id: must be an integer or a string", raw)
        if raw.get("jsonrpc") != "2.0":
            return self._invalid(msg_id if is_request else None, "jsonrpc: must be \"2.0\"", raw)
        if "method" in raw and not isinstance(method, str):
            return self._invalid(msg_id if has_id else None, "method: must be a string", raw)
        if not has_id and "method" not in raw:
            log.warning("dropped a message with neither a method nor an id")
            return
        if self._shutdown and "method" in raw and method != types.EXIT:
            if is_request:
                self._error(msg_id, JsonRpcInvalidRequest.CODE,
                            f"the server is shut down; {method!r} is refused (only 'exit' is accepted)")
            else:
                log.info("ignored notification %r after shutdown", method)
            return
        if is_request and method == types.INITIALIZE and self._initialize_taken:
            # LSP: initialize is sent once. A second was run through: its options and folders replaced the first's
            # under a session already indexing them (a hostile-input audit, session 46).
            log.warning("request %r: a second 'initialize' refused", msg_id)
            self._error(msg_id, JsonRpcInvalidRequest.CODE, "the server is already initialized: 'initialize' is "
                        "sent once per server (start another server for another workspace)")
            return
        if is_request and not self._has_handler(method):
            log.warning("request %r: unknown method %r", msg_id, method)
            self._error(msg_id, JsonRpcMethodNotFound.CODE, f"method not found: {method}")
            return
        try:
            message = self._structure(raw)
        except Exception as e:
            detail = describe_structure_error(e)
            if is_request:
                log.warning("request %r %s: invalid params: %s", msg_id, method, detail)
                self._error(msg_id, JsonRpcInvalidParams.CODE, f"invalid params for {method}: {detail}")
            elif has_id:  # a response to one of our requests: fail its future rather than leave it waiting
                log.warning("response %r could not be read: %s", msg_id, detail)
                self._handle_response(msg_id, None, types.ResponseError(code=JsonRpcInvalidParams.CODE,
                                                                        message=detail))
            else:
                log.warning("dropped notification %s: invalid params: %s", method, detail)
            return
        if is_request and method == types.INITIALIZE:
            self._initialize_taken = True  # after its params were read: one refused as invalid can be sent again
        try:
            self.handle_message(message)
        except Exception:  # a bug of ours, not the client's: answer and keep serving
            log.exception("failed to handle %s", method or f"response {msg_id!r}")
            if is_request:
                self._error(msg_id, -32603, f"internal error handling {method}")

    def _has_handler(self, method: str) -> bool:
        return method in self.fm.builtin_features or method in self.fm.features

    def _structure(self, data: dict[str, Any]) -> Any:
        """pygls' ``structure_message`` for one top-level message, raising instead of logging tracebacks."""
        if "id" in data:
            if "error" in data:
                return self._converter.structure(data, types.ResponseErrorMessage)
            if "method" in data:
                mtype = self.get_message_type(data["method"])
                if mtype is None and "params" not in data:
                    # JSON-RPC lets a request leave `params` out (Neovim's nil params do): Delphi's own methods
                    # then get None, which those that take none accept (a newcomer, session 28).
                    data = {**data, "params": None}
                return self._converter.structure(data, mtype or JsonRPCRequestMessage)
            rtype = self._result_types.pop(data["id"], None) or JsonRPCResponseMessage
            return self._converter.structure(data, rtype)
        return self._converter.structure(data, self.get_message_type(data["method"]) or JsonRPCNotification)

    def _invalid(self, msg_id: Any, why: str, raw: dict[str, Any]) -> None:
        log.warning("invalid message (%s): %s", why, _short(raw, 120))
        if msg_id is not None or ("method" in raw and "id" in raw):
            self._error(msg_id if jsonrpc_id(msg_id) else None, JsonRpcInvalidRequest.CODE, why)

    def _error(self, msg_id: Any, code: int, message: str) -> None:
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

    # ------------------------------------------------------------------ answers
    def _send_handler_result(self, future: Future[Any], *, msg_id: Any) -> None:
        """The client's mistakes (InvalidParams and friends, a request before `initialized`) and a request the
        server cannot answer now (RequestFailed: its index being rebuilt) are answered and logged in one line."""
        exc = None if future.cancelled() else future.exception()
        if isinstance(exc, JsonRpcRequestCancelled):
            # The editor dropped it (VS Code cancels at every keystroke): an ERROR and a 15-line traceback each went
            # to the editor's output panel (a newcomer typing in a large file, session 42). Answered, logged quietly.
            self._request_futures.pop(msg_id, None)
            log.debug("request %r cancelled", msg_id)
            self._send_response(msg_id, error=exc.to_response_error())
            return
        if isinstance(exc, JsonRpcException) and exc.code in (JsonRpcInvalidParams.CODE, JsonRpcInvalidRequest.CODE,
                                                               JsonRpcMethodNotFound.CODE,
                                                               JsonRpcServerNotInitialized.CODE, REQUEST_FAILED):
            self._request_futures.pop(msg_id, None)
            log.warning("request %r answered with error %d: %s", msg_id, exc.code, exc.message)
            self._send_response(msg_id, error=exc.to_response_error())
            return
        super()._send_handler_result(future, msg_id=msg_id)

    # Open documents are the server's own (lsp_documents.OpenDocuments). pygls' copy applied each change by its
    # own line rule, and on the way moved the change's positions in place (a column past what it took for the
    # line's end became that end): the server's handler then read a different edit than the client sent.
    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams) -> Generator[Any, Any, None]:
        if (user_handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield user_handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> Generator[Any, Any, None]:
        if (user_handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield user_handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams) -> Generator[Any, Any, None]:
        if (user_handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield user_handler, (params,), None

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> Generator[Any, Any, None]:
        """Leave with 0 after ``shutdown``, 1 without (LSP specification)."""
        if (user_handler := self.fm.features.get(types.EXIT)) is not None:
            yield user_handler, args, None
        code = 0 if self._shutdown else 1
        if code:
            log.warning("exit without shutdown: leaving with status 1")
        self.exit_code = code
        if self.on_exit is not None:
            self.on_exit(code)
        else:  # not run by serve_stdio: pygls' own behaviour
            sys.exit(code)


def _pump(stream: IO[bytes], out: queue.Queue[bytes]) -> None:
    """Copy stdin into ``out`` as chunks arrive (``b""`` at the end); never parses anything.

    Reads the file descriptor, not the buffered object: a daemon thread blocked inside
    ``BufferedReader.read`` holds its lock, and the interpreter aborts at exit trying to take it.
    """
    read: Callable[[int], bytes]
    try:
        fd = stream.fileno()
        read = lambda n: os.read(fd, n)  # noqa: E731
    except (AttributeError, OSError, ValueError):  # an in-memory stream (tests)
        read = getattr(stream, "read1", stream.read)
    try:
        while chunk := read(CHUNK):
            out.put(chunk)
    except (OSError, ValueError) as e:
        log.warning("reading stdin failed: %s", e)
    out.put(b"")


def serve_stdio(server: LanguageServer, stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None) -> int:
    """Serve LSP over stdio until ``exit`` or end of input; return the process exit status."""
    protocol = server.protocol
    if not isinstance(protocol, DelphiProtocol):
        raise TypeError("serve_stdio needs a server built with protocol_cls=DelphiProtocol")
    server._stop_event = threading.Event()
    protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
    chunks: queue.Queue[bytes] = queue.Queue(maxsize=1024)  # bounded: a fast writer waits for the framer

    async def run() -> int:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int] = loop.create_future()

        def finish(code: int) -> None:
            if not done.done():
                done.set_result(code)

        protocol.on_exit = finish

        def frames() -> None:
            try:
                def not_json(why: str) -> None:  # JSON-RPC's parse error, id null (an editor newcomer, session 25)
                    loop.call_soon_threadsafe(protocol._error, None, -32700, f"parse error: {why}")

                def too_large(rid: int | str, why: str) -> None:
                    loop.call_soon_threadsafe(protocol._error, rid, -32600, f"invalid request: {why}; not read")

                for message in Framer(chunks, on_not_json=not_json, on_too_large=too_large).messages():
                    loop.call_soon_threadsafe(protocol.handle_raw, message)
                code = 0 if protocol._shutdown else 1
                if code:
                    log.warning("end of input without shutdown and exit: leaving with status 1")
                loop.call_soon_threadsafe(finish, code)
            except RuntimeError:  # the loop closed after `exit`: what is still arriving has no reader
                return

        # Daemon threads: a read blocked on stdin must not keep the process alive after exit.
        threading.Thread(target=_pump, args=(stdin or sys.stdin.buffer, chunks), name="delphi-stdin",
                         daemon=True).start()
        threading.Thread(target=frames, name="delphi-framer", daemon=True).start()
        return await done

    code = 1
    try:
        code = asyncio.run(run())
    except BrokenPipeError:
        log.error("the client closed the connection; shutting down")
    except KeyboardInterrupt:  # Ctrl-C in a terminal: one line, not asyncio's traceback (a newcomer, session 27)
        log.warning("interrupted; the index stays consistent and the next start resumes")
        code = 130
    finally:
        server.shutdown()
    return code
