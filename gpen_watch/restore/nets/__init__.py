"""The networks and their building blocks, torch modules only: the GPEN generator (``gpen_model``,
``gpen_blocks``, ``gpen_ops``), the detector (``retinaface``, ``resnet``, ``anchors``), the parser
(``parsenet``), the upscaler (``rrdbnet``), and the load-time rewrites that make them faster without
changing what they compute (``fold``, ``fused_conv``, ``reflect_conv``, ``upconv``, ``convlayer``,
``quant``). Nothing here knows of photos, jobs or settings files."""
