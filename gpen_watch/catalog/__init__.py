"""The models gpen-watch knows by name, torch-free: each file's name, URL, size, digest and licence
(``registry``), and the architecture each checkpoint is (``gpen_config``, ``rrdbnet_config``).

Below the configuration (which checks a model name against it), the model store (which downloads
and finds the files) and the engine (which builds the networks these describe)."""
