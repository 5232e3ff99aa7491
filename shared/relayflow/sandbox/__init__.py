"""Run user Python in a separate, limited process (the ``code`` step).

Isolation is a process boundary, not a filter on the source text: the code runs in a fresh
``python -I -S -B`` with an empty environment, a fresh temporary working directory,
resource limits, and a jail set before it starts (:mod:`relayflow.sandbox.runner`,
:mod:`relayflow.sandbox.jail`): killed with its parent, a seccomp filter (no network, no
signals beyond itself, no new processes) and the standard library only. What this protects
against and what it does not is in ``docs/code-step.md``.

Standard library only (plus :mod:`relayflow.errors`), so it imports fast and needs neither
the network nor AWS.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import IO, Any

from relayflow.errors import CodeError, CodeLimitExceeded
from relayflow.sandbox.limits import Limits, truncate_output

__all__ = ["CodeOutcome", "Limits", "run_code"]

RUNNER = Path(__file__).with_name("runner.py")
#: ``sys.executable`` flags: isolated mode (no environment variables, no script directory on
#: the path, no user site), no ``site`` (no site-packages), no ``.pyc`` writing.
PYTHON_FLAGS = ("-I", "-S", "-B")
#: Bytes of the child's stderr kept for a crash report.
STDERR_TAIL = 2000
#: Grace for the reply beyond the output limit and the kept print() text (the JSON framing).
REPLY_SLACK = 64_000
PR_SET_DUMPABLE = 4
#: The rusage CPU time of a child that RLIMIT_CPU stopped can read up to ~8% below the
#: limit (measured: 0.91 s for a 1 s limit); the kernel's own clock is not exposed to us.
CPU_SHARE_AT_LIMIT = 0.85


@dataclass(frozen=True)
class CodeOutcome:
    """A successful run: the JSON value the code returned (or its truncation marker)."""

    value: Any
    #: What the code printed (sys.stdout and sys.stderr), cut to ``Limits.stdout_chars``.
    stdout: str
    #: From starting the interpreter to reaping it, in milliseconds.
    duration_ms: float
    #: CPU time the child used (user + system), in milliseconds.
    cpu_ms: float


@dataclass(frozen=True)
class _Exit:
    returncode: int
    cpu_seconds: float
    timed_out: bool
    #: Whether the kernel's OOM killer killed a process while the child ran (None: unknown).
    oom_kill: bool | None = None


def run_code(
    code: str,
    *,
    steps: Any,
    trigger: Any,
    input: Any,
    run: Any,
    limits: Limits,
) -> CodeOutcome:
    """Run ``code`` as the body of a function of ``steps``, ``trigger``, ``input`` and ``run``
    in a child process under ``limits``; its return value is the outcome.

    Raises :class:`~relayflow.errors.CodeError` when the code does not compile, raises, exits,
    signals its own process, breaks a sandbox rule or returns a value JSON cannot hold, or when
    the sandbox cannot be set up here; and :class:`~relayflow.errors.CodeLimitExceeded` when
    it runs out of CPU time, memory or wall-clock time."""
    _protect_parent()
    request = {
        "code": code,
        "steps": steps,
        "trigger": trigger,
        "input": input,
        "run": run,
        "limits": limits.to_dict(),
    }
    workdir = tempfile.mkdtemp(prefix="relayflow-code-")
    try:
        with (
            tempfile.TemporaryFile() as stdin,
            tempfile.TemporaryFile() as stdout,
            tempfile.TemporaryFile() as stderr,
        ):
            stdin.write(json.dumps(request, separators=(",", ":")).encode())
            stdin.seek(0)
            oom_before = _oom_kills()
            started = time.perf_counter()
            process = subprocess.Popen(
                # The runner binds itself to this pid (the parent-death signal).
                [sys.executable, *PYTHON_FLAGS, str(RUNNER), str(os.getpid())],
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                cwd=workdir,
                env={},
                close_fds=True,
                start_new_session=True,
            )
            exit_ = _wait(process, limits.wall_seconds, oom_before)
            duration_ms = (time.perf_counter() - started) * 1000
            reply = _read_reply(stdout, limits)
            stderr_tail = _tail(stderr)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return _outcome(reply, exit_, stderr_tail, limits, duration_ms)


def _outcome(
    reply: dict[str, Any] | None,
    exit_: _Exit,
    stderr_tail: str,
    limits: Limits,
    duration_ms: float,
) -> CodeOutcome:
    if exit_.timed_out:
        raise _limit("wall", limits)
    if reply is not None and "signal" in reply:
        # Written just before the code signalled itself; it stands only if that killed it.
        number = _as_int(reply["signal"])
        if number is None or exit_.returncode != -number:
            reply = None
        else:
            raise _own_signal(exit_.returncode, reply)
    if reply is None:
        raise _no_reply(exit_, stderr_tail, limits)
    stdout = reply.get("stdout")
    stdout = stdout[: limits.stdout_chars + 100] if isinstance(stdout, str) else ""
    if "ok" in reply:
        # The runner truncates already; checked again because the reply is the child's word.
        try:
            value = truncate_output(reply["ok"], limits.output_bytes)
        except (ValueError, RecursionError) as exc:
            raise CodeError(
                "the code process sent a malformed reply", kind="crash", stdout=stdout
            ) from exc
        return CodeOutcome(value, stdout, duration_ms, exit_.cpu_seconds * 1000)
    error = reply.get("error")
    if not isinstance(error, dict):
        raise CodeError("the code process sent a malformed reply", kind="crash", stdout=stdout)
    if error.get("kind") == "limit":
        raise _limit("memory", limits)
    raise _code_error(error, stdout)


def _code_error(error: dict[str, Any], stdout: str) -> CodeError:
    kinds = ("syntax", "exception", "result", "sandbox")
    kind = error.get("kind") if error.get("kind") in kinds else "crash"
    name = str(error.get("type") or "Error")[:200]
    message = str(error.get("message") or "")[:2000]
    line = error.get("line") if isinstance(error.get("line"), int) else None
    where = f" at line {line}" if line is not None else ""
    if kind == "sandbox":
        return CodeError(f"the code sandbox could not be set up here: {message}", kind=kind)
    if kind == "result":
        text = f"the code returned a value that is not JSON ({name}: {message})"
    else:
        text = f"{name}{where}: {message}" if message else f"{name}{where}"
    frames = _frames(error.get("frames"))
    if len(frames) > 1:
        # The user's own call chain (never a frame of the runner or of the engine): the
        # message is what reaches the run's cause.
        text += "\nin the code, most recent call last:" + "".join(
            f"\n  line {f['line']}" + (f", in {f['function']}" if f["function"] else "")
            for f in frames
        )
    extra = {"rule": error["rule"]} if error.get("rule") in ("network", "signal") else {}
    return CodeError(
        text, kind=kind, exception=name, line=line, stdout=stdout, frames=frames, **extra
    )


def _frames(raw: Any) -> list[dict[str, Any]]:
    """The user-code frames of the child's reply, checked (it is the child's word)."""
    if not isinstance(raw, list):
        return []
    return [
        {"line": f["line"], "function": str(f.get("function") or "")[:100]}
        for f in raw[:20]
        if isinstance(f, dict) and isinstance(f.get("line"), int)
    ]


def _own_signal(returncode: int, reply: dict[str, Any]) -> CodeError:
    stdout = reply.get("stdout")
    return CodeError(
        f"the code ended its own process with {_signal_name(-returncode)}",
        kind="signal",
        signal=_signal_name(-returncode),
        stdout=stdout[:20_000] if isinstance(stdout, str) else "",
    )


def _as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _limit(which: str, limits: Limits) -> CodeLimitExceeded:
    value, unit, label = {
        "cpu": (limits.cpu_seconds, "s", "CPU-time"),
        "memory": (limits.memory_mb, "MB", "memory"),
        "wall": (limits.wall_seconds, "s", "wall-clock"),
    }[which]
    return CodeLimitExceeded(
        f"the code ran past its {label} limit of {value} {unit}",
        limit=which,
        value=value,
        unit=unit,
    )


def _no_reply(exit_: _Exit, stderr_tail: str, limits: Limits) -> Exception:
    """Why a child that sent no reply ended, from kernel facts only: its exit status, its
    CPU time, the OOM killer's count, and (for a Python-level MemoryError) its stderr.

    A signal the code sent itself through Python came with a ``{"signal"}`` reply and is
    handled before this; one sent around Python (ctypes) is reported as a plain crash."""
    code = exit_.returncode
    if code == -signal.SIGSYS:
        # The filter kills only for a foreign-ABI syscall; every other refusal is an errno.
        return CodeError(
            "the code made a system call the sandbox forbids (seccomp), and was killed",
            kind="seccomp",
            stderr=stderr_tail,
        )
    if code == -signal.SIGKILL and exit_.oom_kill:
        return _limit("memory", limits)
    if code == -signal.SIGXCPU or (
        code == -signal.SIGKILL and exit_.cpu_seconds >= limits.cpu_seconds * CPU_SHARE_AT_LIMIT
    ):
        # RLIMIT_CPU sends SIGXCPU at the soft limit and SIGKILL at the hard one (a second
        # later), never below: the code's own SIGXCPU comes with a {"signal"} reply.
        return _limit("cpu", limits)
    if code > 0 and "MemoryError" in stderr_tail:
        return _limit("memory", limits)
    how = f"signal {_signal_name(-code)}" if code < 0 else f"exit status {code}"
    return CodeError(
        f"the code process ended without a result ({how})", kind="crash", stderr=stderr_tail
    )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _wait(process: subprocess.Popen[bytes], timeout: float, oom_before: int | None) -> _Exit:
    """Wait for the child up to ``timeout`` seconds, kill its process group (the child itself
    on a timeout, anything it left behind otherwise) and reap it with its CPU usage."""
    exited = _wait_exited(process.pid, timeout)
    # The child is still alive or a zombie here, so its pid (the group id) cannot be reused.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    oom_after = _oom_kills()
    oom = None if oom_before is None or oom_after is None else oom_after > oom_before
    return _Exit(
        process.returncode, usage.ru_utime + usage.ru_stime, timed_out=not exited, oom_kill=oom
    )


def _oom_kills() -> int | None:
    """How many processes the kernel's OOM killer has killed since boot (``oom_kill`` in
    ``/proc/vmstat``, Linux 4.13+), or None where that cannot be read. RLIMIT_AS makes the
    code's own allocations fail with MemoryError; only the OOM killer ends it with SIGKILL
    for memory, and in Lambda's one-function micro-VM a kill during the step is the step's."""
    try:
        with open("/proc/vmstat", "rb") as vmstat:
            for line in vmstat:
                if line.startswith(b"oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _wait_exited(pid: int, timeout: float) -> bool:
    """Whether ``pid`` exited within ``timeout`` seconds; it is left unreaped."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return _poll_exited(pid, timeout)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        return bool(poller.poll(max(0.0, timeout) * 1000))
    finally:
        os.close(pidfd)


def _poll_exited(pid: int, timeout: float) -> bool:
    """:func:`_wait_exited` for kernels without pidfd (before Linux 5.3)."""
    deadline = time.monotonic() + timeout
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.002)
    return True


def _read_reply(stdout: IO[bytes], limits: Limits) -> dict[str, Any] | None:
    """The child's reply, or None when it sent none or something that is not one."""
    cap = limits.output_bytes + 4 * limits.stdout_chars + REPLY_SLACK
    stdout.seek(0)
    data = stdout.read(cap + 1)
    if not data or len(data) > cap:
        return None
    try:
        reply = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return reply if isinstance(reply, dict) else None


def _tail(stream: IO[bytes]) -> str:
    stream.seek(0, os.SEEK_END)
    stream.seek(max(0, stream.tell() - STDERR_TAIL))
    return stream.read().decode(errors="replace")


@cache
def _protect_parent() -> None:
    """Make this process non-dumpable, once. Its ``/proc/<pid>/environ`` and ``/proc/<pid>/mem``
    (where the Lambda credentials are) then stay closed to a child of the same uid; root
    still reads them, which is why the Lambda runtime not running as root matters."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
