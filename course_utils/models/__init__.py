"""Networks the chapters build from the references, and bridges to PyTorch's own layers.

``transformer`` (chapter 06's encoder-decoder), ``resnet`` (chapter 07's convolutional
baseline), ``torch_interop`` (the course's ``MultiHeadAttention`` <-> ``nn.MultiheadAttention``),
``twins`` (graded layers computed by PyTorch's own functions: what the class edition builds),
``vit_fast`` (chapter 07's ViT as the trainer runs it), ``mirror`` (that ViT tied to its
left-right mirror: an image and its mirror get the same logits), ``whitening`` (patch-whitening
filters for a tokenizer's first layer), ``airbench`` (a tokenizer built like the convolutional half
of airbench, the fastest CIFAR-10 trainer).

May import torch and ``references``; never ``training``, ``grading`` or ``cli``.
"""
