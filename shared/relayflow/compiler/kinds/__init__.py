"""One module per step kind, each turning its step into ASL states.

A kind is ``emit(ctx, key, step)`` against :class:`relayflow.compiler.emitter.Emitter` and
imports only that protocol and the helpers below the compiler's driver (``states``, ``asl``,
``liveness``, the definition models); :mod:`relayflow.compiler.registry` maps step types to
kinds.
"""
