"""Compat fix ``definition_unicode``: non-ASCII text in a definition runs as on AWS.

``json.dumps`` (and so boto3's callers, Relayflow's runner and control plane) writes every
non-ASCII character as a ``\\uXXXX`` escape; moto's grammar read the raw text, so intrinsic
string literals lost the backslashes and ``.$`` keys kept the escapes.
"""

from __future__ import annotations

from local_asl import machine, pass_state

from relayflow.local import compat
from relayflow.local.compat_definition import decoded_escapes

PARAMETERS = {
    "greeting.$": "States.Format('Grüße, {}!', $.name)",
    "ключ.$": "$.name",
    "plain": "naïve 東京",
}
EXPECTED = {"greeting": "Grüße, Zoë!", "ключ": "Zoë", "plain": "naïve 東京"}


def test_intrinsic_literals_and_dollar_keys_keep_their_characters(rt):
    # Given a Pass state whose intrinsic literal, .$ key and plain value are not ASCII
    asl = machine({"Greet": pass_state(Parameters=PARAMETERS, OutputPath="$")})
    # When it runs (the runtime sends the definition as json.dumps writes it: escaped)
    record = rt.run("unicode-literals", asl, {"name": "Zoë"})
    # Then the output holds the characters as written, as Step Functions gives them
    assert record.output == EXPECTED


def test_without_the_fix_moto_mangles_escaped_characters(rt):
    asl = machine({"Greet": pass_state(Parameters=PARAMETERS, OutputPath="$")})
    compat.apply(skip=["definition_unicode"])
    try:
        record = rt.run("unicode-unfixed", asl, {"name": "Zoë"})
    finally:
        compat.apply()
    assert record.output["greeting"] == "Gru00fcu00dfe, Zoë!"
    assert "ключ" not in record.output


def test_decoding_keeps_the_json_value_and_leaves_other_text_alone():
    text = '{"a": "Gr\\u00fc\\u00dfe", "b": "say \\"hi\\"\\n", "n": 1.5}'
    assert decoded_escapes(text) == '{"a": "Grüße", "b": "say \\"hi\\"\\n", "n": 1.5}'
    assert decoded_escapes('{"a": "ascii"}') == '{"a": "ascii"}'
    assert decoded_escapes("{not json \\u") == "{not json \\u"


def test_skipping_a_fix_and_applying_again_keeps_every_fix_in_its_order(rt):
    # Given the fixes applied, then one in the middle of the parser's chain skipped and back
    compat.apply(skip=["definition_unicode"])
    assert "definition_unicode" not in compat.applied()
    compat.apply()
    # Then every fix is applied again, in the order they were first applied (the parser's
    # later wrappers, such as distributed_integer_percentage, are not lost)
    assert compat.applied() == [fix.name for fix in compat.fixes()]
    asl = machine({"Greet": pass_state(Parameters=PARAMETERS, OutputPath="$")})
    assert rt.run("unicode-again", asl, {"name": "Zoë"}).output == EXPECTED
