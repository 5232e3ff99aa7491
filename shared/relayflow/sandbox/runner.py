"""The child side of the code sandbox: runs one piece of user code and reports on its stdout.

The parent starts this file as ``python -I -S -B runner.py <parent pid>`` with an empty
environment, so it uses the standard library only and never imports relayflow. Before the
user's code runs it jails itself with ``jail.py`` (loaded from beside this file): bound to
its parent's life, a seccomp filter, a standard-library-only import guard and an audit hook.

Protocol. stdin holds one JSON object, then EOF::

    {"code": str, "steps": …, "trigger": …, "input": …, "run": …, "limits": {…}}

stdout (a regular file) holds one JSON object when the process ends::

    {"ok": <value or truncation marker>, "stdout": str}
    {"error": {"kind": "syntax" | "exception" | "result" | "limit" | "sandbox", "type": str,
               "message": str, "line": int | None, "limit"?: "memory",
               "rule"?: "network" | "signal",
               "frames"?: [{"line": int, "function": str}]}, "stdout": str}
    {"signal": int, "stdout": str}

The last is written just before the code signals its own process; a later reply replaces
it, so the parent reads it only when the process then died of that signal.

The user's ``print()`` (``sys.stdout``/``sys.stderr``) goes to a bounded in-memory buffer that
comes back as ``"stdout"``; file descriptor 1 is pointed at stderr before user code runs, so
nothing the code writes can reach the reply except through that buffer.
"""

from __future__ import annotations

import _ast
import builtins
import io
import json
import os
import resource
import signal
import sys

# Startup time is per-invocation latency: ``typing`` (and ``ast``) are not imported at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FILENAME = "<code>"
MODULE = "relayflow_code"
FUNCTION = "__relayflow_code__"
#: Same value as relayflow.sandbox.limits.PREVIEW_CHARS.
PREVIEW_CHARS = 1000
MESSAGE_CHARS = 2000
#: Frames of the user's code kept for an error (the innermost ones).
MAX_FRAMES = 20
#: Set aside before user code runs and released on MemoryError, so the reply can be built.
RESERVE_BYTES = 2 * 1024 * 1024
MEMORY = {"kind": "limit", "limit": "memory", "type": "MemoryError", "message": "", "line": None}


class Capture(io.TextIOBase):
    """A text stream that keeps the first ``limit`` characters and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.kept = 0
        self.total = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.total += len(text)
        room = self.limit - self.kept
        if room > 0:
            piece = text[:room]
            self.parts.append(piece)
            self.kept += len(piece)
        return len(text)

    def value(self) -> str:
        text = "".join(self.parts)
        if self.total > self.kept:
            text += f"\n[{self.total - self.kept} more characters not kept]"
        return text


def set_limits(limits: dict[str, Any]) -> None:
    """Lower this process's resource limits (soft and hard, so the code cannot raise them
    back unless it runs as root)."""
    cpu = int(limits["cpu_seconds"])
    memory = int(limits["memory_mb"]) * 1024 * 1024
    _lower(resource.RLIMIT_CORE, 0, 0)
    # SIGXCPU at the soft limit; SIGKILL one second later if the code catches SIGXCPU.
    _lower(resource.RLIMIT_CPU, cpu, cpu + 1)
    _lower(resource.RLIMIT_AS, memory, memory)
    _lower(resource.RLIMIT_FSIZE, int(limits["file_bytes"]), int(limits["file_bytes"]))
    _lower(resource.RLIMIT_NOFILE, int(limits["open_files"]), int(limits["open_files"]))
    _lower(resource.RLIMIT_NPROC, int(limits["processes"]), int(limits["processes"]))
    # A write past RLIMIT_FSIZE then fails with OSError (EFBIG) instead of killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _lower(which: int, soft: int, hard: int) -> None:
    _, current = resource.getrlimit(which)
    if current != resource.RLIM_INFINITY:
        hard = min(hard, current)
    resource.setrlimit(which, (min(soft, hard), hard))


def compile_code(code: str) -> Any:
    """The user's code as the body of ``def __relayflow_code__(steps, trigger, input, run)``.

    The body keeps the line numbers of the code as written (it is parsed on its own and then
    moved into the function), so errors name the user's lines."""
    body = compile(code, FILENAME, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True).body
    header = f"def {FUNCTION}(steps, trigger, input, run):\n    pass\n"
    wrapper = compile(header, FILENAME, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
    if body:
        wrapper.body[0].body = body  # type: ignore[attr-defined]
    namespace: dict[str, Any] = {"__builtins__": builtins, "__name__": MODULE}
    exec(compile(wrapper, FILENAME, "exec", dont_inherit=True), namespace)
    return namespace[FUNCTION]


def user_line(exc: BaseException) -> int | None:
    """The innermost line of the user's code in ``exc``'s traceback."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def user_frames(exc: BaseException) -> list[dict[str, Any]]:
    """The frames of the user's code in ``exc``'s traceback, outermost first: only lines of
    ``<code>``, never this runner's or the interpreter's."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename == FILENAME:
            name = "" if code.co_name == FUNCTION else code.co_name[:100]
            frames.append({"line": tb.tb_lineno, "function": name})
        tb = tb.tb_next
    return frames[-MAX_FRAMES:]


def type_name(exc: BaseException) -> str:
    cls = type(exc)
    module = getattr(cls, "__module__", "builtins")
    return cls.__name__ if module in ("builtins", MODULE) else f"{module}.{cls.__name__}"


def message_of(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException:
        text = "<the exception's message could not be read>"
    return text[:MESSAGE_CHARS]


def failure(
    kind: str, exc: BaseException, line: int | None, refusals: Any = None
) -> dict[str, Any]:
    error = {"kind": kind, "type": type_name(exc), "message": message_of(exc), "line": line}
    rule = refusals.rule_of(exc) if refusals is not None else None
    if rule is not None:
        error["rule"] = rule
    return error


def execute(
    request: dict[str, Any], capture: Capture, reserve: list[bytearray], refusals: Any
) -> str:
    """Run the code; the reply's JSON text without its ``stdout`` member."""
    try:
        function = compile_code(request["code"])
    except SyntaxError as exc:
        error = failure("syntax", exc, exc.lineno)
        error["message"] = str(exc.msg)[:MESSAGE_CHARS]
        return json.dumps({"error": error})
    except (ValueError, RecursionError, MemoryError) as exc:
        return json.dumps({"error": failure("syntax", exc, None)})

    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = capture
    try:
        try:
            value = function(request["steps"], request["trigger"], request["input"], request["run"])
        except MemoryError:
            reserve.clear()
            return json.dumps({"error": MEMORY})
        except BaseException as exc:
            error = failure("exception", exc, user_line(exc), refusals)
            error["frames"] = user_frames(exc)
            return json.dumps({"error": error})
        # Serialising can run user code too (a dict subclass's items(), say): same guards.
        try:
            return '{"ok":' + output_text(value, int(request["limits"]["output_bytes"])) + "}"
        except MemoryError:
            reserve.clear()
            return json.dumps({"error": MEMORY})
        except BaseException as exc:
            return json.dumps({"error": failure("result", exc, None)})
    finally:
        sys.stdout, sys.stderr = saved


def output_text(value: Any, limit: int) -> str:
    """``value`` as compact JSON, or the truncation marker when that is over ``limit`` bytes
    (the same marker as relayflow.sandbox.limits.truncation_marker)."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    size = len(text.encode())
    if size <= limit:
        return text
    marker = {"truncated": True, "bytes": size, "limit": limit, "preview": text[:PREVIEW_CHARS]}
    return json.dumps(marker, ensure_ascii=False, separators=(",", ":"))


def load_jail() -> Any:
    """``jail.py`` from beside this file, as a module (the child has no relayflow on its
    path; compiled here rather than through importlib.util, which costs more to import)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jail.py")
    module = type(sys)("relayflow_jail")
    module.__file__ = path
    with open(path, "rb") as source:
        exec(compile(source.read(), path, "exec", dont_inherit=True), module.__dict__)
    return module


def send(fd: int, text: str) -> None:
    """Make ``text`` the whole content of the reply file ``fd``."""
    data = text.encode()
    os.ftruncate(fd, 0)
    done = 0
    while done < len(data):
        done += os.pwrite(fd, data[done:], done)


def main() -> None:
    jail = load_jail()
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    try:
        jail.enter(int(sys.argv[1]))
    except jail.SetupError as exc:
        refuse(reply_fd, exc)
        return
    request = json.loads(sys.stdin.buffer.read())
    sys.stdin.close()
    os.close(0)
    # Python's C-locale coercion sets LC_CTYPE; the code sees no environment at all.
    os.environ.clear()
    capture = Capture(int(request["limits"]["stdout_chars"]))
    reserve = [bytearray(RESERVE_BYTES)]
    set_limits(request["limits"])
    refusals = jail.Refusals()

    def own_signal(number: int) -> None:
        send(reply_fd, json.dumps({"signal": number, "stdout": capture.value()}))

    try:
        jail.lock(refusals, own_signal)
    except jail.SetupError as exc:
        refuse(reply_fd, exc)
        return
    reply = execute(request, capture, reserve, refusals)
    reserve.clear()
    send(reply_fd, reply[:-1] + ',"stdout":' + json.dumps(capture.value()) + "}")
    os.close(reply_fd)


def refuse(reply_fd: int, exc: Exception) -> None:
    """Reply that the jail could not be set up (no user code has run)."""
    error = {"kind": "sandbox", "type": "SetupError", "message": str(exc), "line": None}
    send(reply_fd, json.dumps({"error": error, "stdout": ""}))


if __name__ == "__main__":
    main()
