"""What the engines and the stages share about the machine they run on: the torch device, its
precision and out-of-memory errors (``device``), the process's memory and its budget (``memory``),
the batching policy (``batching``), and the interface of a face-restoration network and its family
(``face_model``)."""
