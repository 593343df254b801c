"""From a frame's body to pygls: JSON-RPC's envelope checked here, so that every request gets exactly one
reply — its result, or the error that says what was wrong with it:

- ``-32700`` Parse error (id null): the body is not JSON;
- ``-32600`` Invalid Request: not a JSON-RPC 2.0 message, a bad id, a request that arrived without a
  usable header, a request after ``shutdown``, or a second ``initialize``;
- ``-32002`` Server not initialized: a request before ``initialize``;
- ``-32602`` Invalid params: params that do not fit the method's type (missing, ``null``, a negative
  position, ``arguments`` that are not an array...), and a command's bad arguments (`ProtocolError`);
- ``-32601`` Method not found (pygls), ``-32603`` Internal error (pygls: a handler that raised).

pygls structures a message while it parses the JSON, and a message that does not fit its type is then
logged and dropped without a reply; here the JSON is parsed first and structured after, so the id is
known when the params are wrong. `ForgeProtocol` is the protocol class: it structures messages the same
way, stricter where pygls is lenient.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import cattrs
from lsprotocol import types as t
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.protocol import JsonRPCResponseMessage, LanguageServerProtocol

from .transport import Message, Unframed

if TYPE_CHECKING:
    from .transport import Event, FrameWriter, Served

log = logging.getLogger("forge_lsp.server.messages")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_NOT_INITIALIZED = -32002
SETTLED_FUTURES_KEPT = 256  # past this many entries in pygls's table of requests in flight, settled ones go


def _detail(exc: BaseException) -> str:
    """What cattrs found wrong, in one line: `textDocument: required field missing; ...`."""
    cause = exc.__cause__ if exc.__cause__ is not None else exc
    if isinstance(cause, cattrs.ClassValidationError):
        try:
            lines = cattrs.transform_error(cause)
        except Exception:  # noqa: BLE001 - an unusual error tree: say what it is
            lines = [str(cause)]
        return "; ".join(line.replace("$.params.", "").replace("$.params", "params") for line in lines[:5])
    return str(cause) or type(cause).__name__


class ForgeProtocol(LanguageServerProtocol):
    """pygls's LSP protocol, with messages structured strictly: a missing ``params`` is ``null`` (then a
    type that requires params says so), ``workspace/executeCommand``'s ``arguments`` must be an array (cattrs
    would turn a string into its characters), and a structuring error says what is wrong."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        if "jsonrpc" not in data or not isinstance(data.get("method"), str):
            return super().structure_message(data)
        if "params" not in data:
            data = {**data, "params": None}
        params = data["params"]
        if data["method"] == t.WORKSPACE_EXECUTE_COMMAND and isinstance(params, dict):
            args = params.get("arguments")
            if args is not None and not isinstance(args, list):
                raise JsonRpcInvalidParams(f"Invalid params: arguments must be an array, not {type(args).__name__}")
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            raise JsonRpcInvalidParams(f"Invalid params for {data['method']}: {_detail(exc)}") from exc

    def handle_message(self, message: Any) -> None:
        try:
            super().handle_message(message)
        finally:
            if len(self._request_futures) > SETTLED_FUTURES_KEPT:
                self._forget_settled()

    def _forget_settled(self) -> None:
        """pygls (2.1.1) files the future of every generator handler's run under a fresh id in its table of
        requests in flight — each didOpen, didChange and didClose, each async command run by
        executeCommand — and never takes it out: ~2 KB and the message's params per edit, for the life of
        the server. A settled future there has nothing left to do (a reply is sent by its done-callback,
        which takes its own entry out; a client's response to one of ours takes it out first): drop them."""
        futures = self._request_futures
        for key in [k for k, f in list(futures.items()) if f.done()]:
            futures.pop(key, None)


class Dispatcher:
    """Decodes a frame's body, checks the envelope, structures the message and hands it to pygls; answers
    every request that pygls would not."""

    def __init__(self, server: Served, writer: FrameWriter, on_exit: Callable[[int], None]) -> None:
        self.server = server
        self.protocol = server.protocol
        self.writer = writer
        self.on_exit = on_exit
        self.initialized = False
        self.shutting_down = False

    def reply_error(self, msg_id: Any, code: int, message: str) -> None:
        log.info("error reply %s to request %r: %s", code, msg_id, message)
        self.writer.send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

    def handle(self, event: Event) -> None:
        try:
            if isinstance(event, Unframed):
                self._unframed(event)
            elif isinstance(event, Message):
                self._message(event.body)
        except SystemExit as exc:  # pygls ends `exit` with sys.exit(0 after shutdown, else 1)
            self.on_exit(exc.code if isinstance(exc.code, int) else 0)
        except Exception:  # noqa: BLE001 - one bad message never ends the session
            log.exception("handling a message failed")

    def _unframed(self, event: Unframed) -> None:
        value = event.value
        if isinstance(value, dict) and _valid_id(value.get("id")) and isinstance(value.get("method"), str):
            self.reply_error(
                value["id"], INVALID_REQUEST, f"Invalid request: it arrived with {event.reason}, so it was not read"
            )

    def _message(self, body: bytes) -> None:
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as exc:
            self.reply_error(None, PARSE_ERROR, f"Parse error: {str(exc)[:200]}")
            return
        if not isinstance(data, dict):
            self.reply_error(None, INVALID_REQUEST, "Invalid request: a message is a JSON object (no batches)")
            return
        has_id = "id" in data
        msg_id = data.get("id")
        if has_id and not _valid_id(msg_id):
            self.reply_error(None, INVALID_REQUEST, "Invalid request: the id must be an integer or a string")
            return
        method = data.get("method")
        if "method" in data:
            self._call(data, method, msg_id if has_id else None, has_id)
        else:
            self._response(data, msg_id, has_id)

    def _call(self, data: dict[str, Any], method: Any, msg_id: Any, is_request: bool) -> None:
        def refuse(code: int, message: str) -> None:
            if is_request:
                self.reply_error(msg_id, code, message)
            else:
                log.warning("notification %r dropped: %s", method, message)

        if data.get("jsonrpc") != "2.0":
            return refuse(INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"')
        if not isinstance(method, str):
            return refuse(INVALID_REQUEST, "Invalid request: the method must be a string")
        params = data.get("params")
        if params is not None and not isinstance(params, (dict, list)):
            return refuse(INVALID_PARAMS, "Invalid params: params must be an object or an array")
        if method == t.EXIT:
            pass
        elif self.shutting_down:
            return refuse(INVALID_REQUEST, "Invalid request: the server is shutting down")
        elif method == t.INITIALIZE and self.initialized:
            return refuse(INVALID_REQUEST, "Invalid request: initialize was already received")
        elif method != t.INITIALIZE and not self.initialized:
            return refuse(SERVER_NOT_INITIALIZED, "Server not initialized: send initialize first")
        try:
            message = self.protocol.structure_message(data)
        except Exception as exc:  # noqa: BLE001 - the id and method are known: say what is wrong
            return refuse(
                INVALID_PARAMS, exc.message if isinstance(exc, JsonRpcException) else f"Invalid params: {exc}"
            )
        if method == t.INITIALIZE:
            self.initialized = True
        elif method == t.SHUTDOWN and is_request:
            self.shutting_down = True
        self.protocol.handle_message(message)

    def _response(self, data: dict[str, Any], msg_id: Any, has_id: bool) -> None:
        """The client's answer to a request of ours: one that does not fit its type still settles the request
        (as untyped data), so nothing waits for it forever."""
        if not has_id or ("result" not in data and "error" not in data):
            log.warning("dropped a message that is neither a request, a notification nor a response")
            return
        try:
            message = self.protocol.structure_message({**data, "jsonrpc": "2.0"})
        except Exception as exc:  # noqa: BLE001
            log.warning("the client's response to %r does not fit its type (%s): passed on untyped", msg_id, exc)
            message = JsonRPCResponseMessage(id=msg_id, jsonrpc="2.0", result=data.get("result"))
        self.protocol.handle_message(message)


def _valid_id(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)
