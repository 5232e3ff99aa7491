"""Approvals for people without an API key: signed guest links (:mod:`.links`) and the
server-rendered page they open (:mod:`.page`)."""
