"""Where a run's private records come from (a *source*) and the public model between them and the flow's rows
(a *codec*): every run, from the command, the Synthesizer or torchrun, opens its data with :func:`open_source`.

    source (private records) -> codec.encode -> rows for the release and the flow -> codec.decode -> outputs

A new kind of data is one source and one codec, registered by name (:func:`register_source`,
:func:`register_codec`) with the module that builds them; nothing in swflow/ is edited.
"""
from .registry import (CODECS, SOURCES, PrivateData, Records, SourceRequest, codec_for, open_source, register_codec,
                       register_source)

__all__ = ["CODECS", "SOURCES", "PrivateData", "Records", "SourceRequest", "codec_for", "open_source",
           "register_codec", "register_source"]
