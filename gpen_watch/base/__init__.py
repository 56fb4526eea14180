"""The leaf utilities every other package stands on: the error types (``errors``), careful file
operations (``fsutil``), standard-stream handling (``streams``) and ``StrEnum`` for Python 3.10
(``strenum``). They import nothing else of gpen_watch."""
