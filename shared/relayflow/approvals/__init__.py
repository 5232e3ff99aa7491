"""Signed guest links, so people without an API key can answer an approval (:mod:`.links`).
The page such a link opens answers through the control plane, so it lives above it
(:mod:`relayflow.api.approval_page`)."""
