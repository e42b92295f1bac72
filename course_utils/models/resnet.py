"""A CIFAR ResNet (He et al., 2016, section 4.2): the convolutional baseline of chapter 07.

``cifar_resnet(depth=20)``: a 3x3 stem, three stages of 3x3 basic blocks at widths 16, 32, 64
(32x32, 16x16, 8x8), global average pooling and a linear classifier; depth = 6n + 2.  ResNet-20
has 0.27M parameters, small enough to train on a laptop CPU within the ViT's budget.
"""

from __future__ import annotations

from torch import Tensor, nn

__all__ = ["cifar_resnet"]


class BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(
            c_in, c_out, 3, stride=stride, padding=1, bias=False
        )
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut = (
            nn.Identity()
            if stride == 1 and c_in == c_out
            else nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False),
                nn.BatchNorm2d(c_out),
            )
        )

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


def cifar_resnet(
    depth: int = 20,
    num_classes: int = 10,
    widths: tuple[int, int, int] = (16, 32, 64),
) -> nn.Module:
    """ResNet-``depth`` for 32x32 images: ``(B, 3, 32, 32) -> logits (B, num_classes)``."""
    if (depth - 2) % 6:
        raise ValueError(
            f"cifar_resnet: depth must be 6n + 2 (20, 32, 44, 56, ...), got {depth}"
        )
    n = (depth - 2) // 6
    layers: list[nn.Module] = [
        nn.Conv2d(3, widths[0], 3, padding=1, bias=False),
        nn.BatchNorm2d(widths[0]),
        nn.ReLU(inplace=True),
    ]
    c_in = widths[0]
    for stage, width in enumerate(widths):
        for i in range(n):
            layers.append(
                BasicBlock(
                    c_in, width, stride=2 if stage > 0 and i == 0 else 1
                )
            )
            c_in = width
    layers += [
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(c_in, num_classes),
    ]
    return nn.Sequential(*layers)
