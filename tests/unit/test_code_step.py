"""The code step: user Python in a child process with no environment and resource limits."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_parent import NOBODY, make_readable_copy, python_for

from relayflow.document import StepRef
from relayflow.errors import CodeError, CodeLimitExceeded, InvalidArgsError
from relayflow.sandbox import Limits, run_code
from relayflow.sandbox.limits import PREVIEW_CHARS, truncate_output
from relayflow.settings import get_settings, override_settings
from relayflow.steps import code

FAST = Limits(cpu_seconds=1, memory_mb=64, wall_seconds=3, output_bytes=100_000)


def run(source: str, limits: Limits = FAST, **variables: Any) -> Any:
    given = {"steps": {}, "trigger": {}, "input": None, "run": {}, **variables}
    return run_code(source, limits=limits, **given)


def step_event(config: dict[str, Any], **doc: Any) -> dict[str, Any]:
    return {
        "step": StepRef(key="calc", type="code", config={"language": "python", **config}).wire(),
        "doc": {
            "run": {"id": "run-1", "workflow_id": "wf", "tenant": "acme"},
            "trigger": {},
            "steps": {},
            **doc,
        },
        "context": {"execution_id": "exec-1", "state": "calc", "attempt": 0},
    }


# --------------------------------------------------------------------------- results


def test_the_code_sees_steps_trigger_input_and_run_and_returns_the_output():
    # Given a step whose input template reads the trigger
    event = step_event(
        {
            "code": (
                "subtotal = sum(line['qty'] * line['price'] for line in trigger['lines'])\n"
                "return {'net': subtotal - steps['coupon']['output']['off'],\n"
                "        'big': subtotal > input['threshold'], 'run': run['id']}\n"
            ),
            "input": {"threshold": "{{ trigger.threshold }}"},
        },
        trigger={"threshold": 100, "lines": [{"qty": 2, "price": 60.0}]},
        steps={"coupon": {"output": {"off": 5}, "status": "succeeded"}},
    )
    # When the step runs
    result = code.run(event)
    # Then the return value, computed from all four variables, is the output
    assert result["output"] == {"net": 115.0, "big": True, "run": "run-1"}


def test_code_without_a_return_outputs_null():
    assert run("x = 1").value is None


def test_print_output_is_captured_and_does_not_break_the_reply():
    # Given code that prints, writes to stderr and writes straight to file descriptor 1
    source = (
        "import os, sys\n"
        "print('hello', input)\n"
        "print('warning', file=sys.stderr)\n"
        "os.write(1, b'{not json')\n"
        "return {'ok': True}\n"
    )
    # When it runs
    outcome = run(source, input="there")
    # Then the value arrives intact and what it printed comes back as stdout
    assert outcome.value == {"ok": True}
    assert outcome.stdout == "hello there\nwarning\n"


def test_print_output_is_kept_up_to_its_limit():
    outcome = run("print('x' * 50_000)\nreturn 1")
    assert outcome.value == 1
    assert outcome.stdout.startswith("x" * FAST.stdout_chars)
    assert outcome.stdout.endswith(f"[{50_001 - FAST.stdout_chars} more characters not kept]")


def test_each_run_gets_a_fresh_working_directory_that_is_removed_after():
    outcome = run("import os\nopen('scratch.txt', 'w').write('x')\nreturn os.getcwd()")
    assert Path(outcome.value).name.startswith("relayflow-code-")
    assert not Path(outcome.value).exists()


def test_the_code_has_the_standard_library_only():
    with pytest.raises(CodeError) as info:
        run("import boto3")
    assert info.value.details["exception"] == "ModuleNotFoundError"


# --------------------------------------------------------------------------- errors


def test_an_exception_names_its_type_message_and_the_users_line():
    # Given code whose error is raised in a helper it defines, called from line 5
    source = "def ratio(a, b):\n    return a / b\n\nx = 1\nreturn ratio(x, 0)\n"
    # When it runs
    with pytest.raises(CodeError) as info:
        run(source)
    # Then the error points at the innermost line of the user's code, not the wrapper's
    error = info.value
    assert type(error).__name__ == "Relayflow.CodeError"
    assert error.details == {
        "kind": "exception",
        "exception": "ZeroDivisionError",
        "line": 2,
        "stdout": "",
        "frames": [{"line": 5, "function": ""}, {"line": 2, "function": "ratio"}],
    }
    # And the message names the user's own call chain, and nothing of the runner
    assert error.message == (
        "ZeroDivisionError at line 2: division by zero\n"
        "in the code, most recent call last:\n  line 5\n  line 2, in ratio"
    )
    assert "runner.py" not in error.message and "File" not in error.message


def test_an_exception_from_a_library_names_the_qualified_type():
    with pytest.raises(CodeError) as info:
        run("import json\n\nreturn json.loads('{')")
    assert info.value.details["exception"] == "json.decoder.JSONDecodeError"
    assert info.value.details["line"] == 3


def test_what_the_code_printed_before_failing_travels_with_the_error():
    with pytest.raises(CodeError) as info:
        run("print('checking')\nraise ValueError('bad order')")
    assert info.value.details["stdout"] == "checking\n"
    assert info.value.message == "ValueError at line 2: bad order"


@pytest.mark.parametrize(
    ("source", "line", "message"),
    [
        ("x = 1\ny = (\nreturn y\n", 2, "'(' was never closed"),
        ("total = 0\nfor line in trigger:\ntotal += 1\n", 3, "expected an indented block"),
        ("x = 1\n\nawait x\n", 3, "'await' outside async function"),
    ],
)
def test_a_syntax_error_reports_the_users_line(source, line, message):
    with pytest.raises(CodeError) as info:
        run(source)
    assert info.value.details["kind"] == "syntax"
    assert info.value.details["line"] == line
    assert message in info.value.message
    assert info.value.message.startswith(f"{info.value.details['exception']} at line {line}: ")


@pytest.mark.parametrize(
    ("source", "exception"),
    [
        ("return {1, 2}", "TypeError"),
        ("return float('nan')", "ValueError"),
        ("return object()", "TypeError"),
        ("x = []\nx.append(x)\nreturn x", "ValueError"),
    ],
)
def test_a_value_json_cannot_hold_is_a_code_error(source, exception):
    with pytest.raises(CodeError) as info:
        run(source)
    assert info.value.details["kind"] == "result"
    assert info.value.details["exception"] == exception
    assert info.value.message.startswith("the code returned a value that is not JSON")


def test_exiting_is_a_code_error_not_a_result():
    with pytest.raises(CodeError) as info:
        run("import sys\nsys.exit(3)")
    assert info.value.details["exception"] == "SystemExit"
    with pytest.raises(CodeError) as info:
        run("import os\nos._exit(0)")
    assert info.value.details["kind"] == "crash"
    assert "ended without a result (exit status 0)" in info.value.message


# --------------------------------------------------------------------------- limits


def test_an_infinite_loop_is_stopped_by_the_cpu_limit():
    # Given one second of CPU time and a wall clock generous enough for a busy test machine
    # (a process that gets a third of a core needs several seconds for one second of CPU)
    limits = Limits(cpu_seconds=1, memory_mb=64, wall_seconds=60, output_bytes=100_000)
    # When the code spins
    with pytest.raises(CodeLimitExceeded) as info:
        run("while True:\n    pass", limits)
    # Then the CPU limit, not the wall clock, stopped it
    assert type(info.value).__name__ == "Relayflow.CodeLimitExceeded"
    assert info.value.details == {"limit": "cpu", "value": 1, "unit": "s"}


def test_code_that_waits_is_stopped_by_the_wall_clock():
    limits = Limits(cpu_seconds=1, memory_mb=64, wall_seconds=0.5, output_bytes=100_000)
    with pytest.raises(CodeLimitExceeded) as info:
        run("import time\ntime.sleep(30)", limits)
    assert info.value.details == {"limit": "wall", "value": 0.5, "unit": "s"}


@pytest.mark.parametrize(
    "source",
    [
        "return len(bytearray(10**10))",
        "hoard = []\nwhile True:\n    hoard.append(' ' * 10**6)",
    ],
    ids=["one-big-allocation", "growing-list"],
)
def test_a_memory_bomb_is_stopped_by_the_memory_limit(source):
    with pytest.raises(CodeLimitExceeded) as info:
        run(source)
    assert info.value.details == {"limit": "memory", "value": 64, "unit": "MB"}


def test_a_file_bigger_than_the_file_limit_cannot_be_written():
    with pytest.raises(CodeError) as info:
        run("open('big', 'wb').write(b'x' * 2_000_000)")
    assert info.value.details["exception"] == "OSError"
    assert "File too large" in info.value.message


def test_a_step_can_lower_the_ceilings_but_never_raise_them():
    with override_settings(code_cpu_seconds=5, code_memory_mb=256, code_wall_seconds=10.0):
        settings = get_settings()
        asked_more = Limits.for_step(settings, cpu_seconds=60, memory_mb=2048, wall_seconds=300)
        asked_less = Limits.for_step(settings, cpu_seconds=1, memory_mb=64, wall_seconds=2)
        asked_nothing = Limits.for_step(settings)
    assert (asked_more.cpu_seconds, asked_more.memory_mb, asked_more.wall_seconds) == (5, 256, 10)
    assert (asked_less.cpu_seconds, asked_less.memory_mb, asked_less.wall_seconds) == (1, 64, 2)
    assert asked_nothing == asked_more


def test_a_step_asking_for_more_time_than_the_ceiling_is_held_to_the_ceiling():
    # Given a ceiling of half a second and a step that asks for five minutes
    event = step_event({"code": "import time\ntime.sleep(30)", "wall_seconds": 300})
    # When it runs
    with override_settings(code_wall_seconds=0.5), pytest.raises(CodeLimitExceeded) as info:
        code.run(event)
    # Then the ceiling stopped it
    assert info.value.details == {"limit": "wall", "value": 0.5, "unit": "s"}


# --------------------------------------------------------------------------- output size


def test_an_output_over_the_limit_is_replaced_by_a_truncation_marker():
    outcome = run("return 'x' * 200_000")
    assert outcome.value == {
        "truncated": True,
        "bytes": 200_002,
        "limit": 100_000,
        "preview": '"' + "x" * (PREVIEW_CHARS - 1),
    }


def test_an_output_at_the_limit_is_kept_and_bytes_count_utf8():
    # '"' + 99_998 characters + '"' is exactly 100,000 bytes; "é" is two bytes in UTF-8
    assert run("return 'x' * 99_998").value == "x" * 99_998
    marker = run("return 'é' * 50_000").value
    assert marker["truncated"] is True and marker["bytes"] == 100_002


def test_the_parent_enforces_the_output_limit_whatever_the_child_sends():
    assert truncate_output(["a"] * 10, limit=1_000) == ["a"] * 10
    marker = truncate_output("y" * 5_000, limit=1_000)
    assert marker == {
        "truncated": True,
        "bytes": 5_002,
        "limit": 1_000,
        "preview": marker["preview"],
    }
    assert marker["preview"] == '"' + "y" * (PREVIEW_CHARS - 1)


# --------------------------------------------------------------------------- isolation


def test_the_code_sees_no_environment_and_no_credentials(monkeypatch):
    # Given AWS credentials in the parent's environment
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAPARENT")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "parent-secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "parent-token")
    # When the code looks for them in its environment, in /proc and through the shell
    outcome = run(
        "import os\n"
        "return {'environ': dict(os.environ),\n"
        "        'proc': open('/proc/self/environ', 'rb').read().decode(),\n"
        "        'getenv': os.getenv('AWS_SECRET_ACCESS_KEY')}\n"
    )
    # Then there is nothing to find
    assert outcome.value == {"environ": {}, "proc": "", "getenv": None}


UNPRIVILEGED_PARENT = """
import json, os, subprocess, sys
from relayflow.errors import RelayflowError
from relayflow.sandbox import Limits, run_code

def attempt(source):
    limits = Limits(cpu_seconds=2, memory_mb=128, wall_seconds=5, output_bytes=100_000)
    try:
        return {"value": run_code(source, steps={}, trigger={}, input=None, run={},
                                  limits=limits).value}
    except RelayflowError as exc:
        return {"message": exc.message, **exc.details}

# A plain child of the same uid, started before any code step ran, can read our environment.
peek = "import os; print(open(f'/proc/{os.getppid()}/environ').read())"
plain = subprocess.run([sys.executable, "-c", peek], env={}, capture_output=True, text=True)
plain = plain.stdout
print(json.dumps({
    "plain_child_sees_secret": "parent-secret" in plain,
    "environ": attempt("import os\\nreturn open(f'/proc/{os.getppid()}/environ').read()"),
    "mem": attempt("import os\\nreturn len(open(f'/proc/{os.getppid()}/mem', 'rb').read(1))"),
    "fork": attempt("import os\\nreturn os.fork()"),
    "thread": attempt("import threading\\nthreading.Thread(target=print).start()"),
}))
"""


@pytest.fixture(scope="module")
def unprivileged_parent() -> Iterator[dict[str, Any]]:
    """Run a code step from a parent that is not root, as in Lambda; locally, as root, the
    parent drops to uid 65534 and holds AWS_SECRET_ACCESS_KEY in its initial environment.
    It imports relayflow from a world-readable copy, so the checkout may be private (0700)."""
    for copy in make_readable_copy():
        done = subprocess.run(
            [python_for(NOBODY), "-c", UNPRIVILEGED_PARENT],
            user=NOBODY,
            group=NOBODY,
            extra_groups=[],
            cwd="/",
            env={"PYTHONPATH": str(copy.shared), "AWS_SECRET_ACCESS_KEY": "parent-secret"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        yield json.loads(done.stdout)


def test_the_code_cannot_read_the_parents_environment_or_memory(unprivileged_parent):
    # Given a parent whose environment holds a secret that a plain same-uid child can read
    assert unprivileged_parent["plain_child_sees_secret"] is True
    # Then code run through the sandbox is refused /proc/<parent>/environ and /mem
    for attempt in ("environ", "mem"):
        assert unprivileged_parent[attempt]["exception"] == "PermissionError", attempt
        assert "parent-secret" not in json.dumps(unprivileged_parent[attempt])


def test_the_code_cannot_start_processes_or_threads_when_not_root(unprivileged_parent):
    assert unprivileged_parent["fork"]["exception"] == "BlockingIOError"
    assert (
        unprivileged_parent["thread"]["message"] == "RuntimeError at line 2: can't start new thread"
    )


# --------------------------------------------------------------------------- step config


@pytest.mark.parametrize(
    "config",
    [{"language": "ruby", "code": "1"}, {"code": ""}, {"code": "return 1", "cpu_seconds": 0}],
    ids=["language", "empty-code", "cpu-below-one"],
)
def test_a_malformed_config_is_invalid_args(config):
    with pytest.raises(InvalidArgsError):
        code.run(step_event(config))
