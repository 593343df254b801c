"""A small MobileNet-style classifier as a user writes one: a script that builds it and runs it once (and `build`)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SqueezeExcite(nn.Module):
    def __init__(self, ch, r=4):
        super().__init__()
        self.fc1 = nn.Conv2d(ch, ch // r, 1)
        self.fc2 = nn.Conv2d(ch // r, ch, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        s = F.silu(self.fc1(s))
        return x * torch.sigmoid(self.fc2(s))


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand=4):
        super().__init__()
        hid = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.expand = nn.Sequential(nn.Conv2d(cin, hid, 1, bias=False), nn.BatchNorm2d(hid), nn.SiLU())
        self.dw = nn.Sequential(
            nn.Conv2d(hid, hid, 3, stride, 1, groups=hid, bias=False), nn.BatchNorm2d(hid), nn.SiLU()
        )
        self.se = SqueezeExcite(hid)
        self.project = nn.Sequential(nn.Conv2d(hid, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.project(self.se(self.dw(self.expand(x))))
        return x + y if self.use_res else y


class TinyMobileNet(nn.Module):
    def __init__(self, num_classes=100, width=16):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 2, 1, bias=False), nn.BatchNorm2d(width), nn.SiLU())
        cfg = [(width, 24, 1), (24, 24, 1), (24, 40, 2), (40, 40, 1), (40, 64, 2), (64, 64, 1)]
        self.blocks = nn.Sequential(*[InvertedResidual(a, b, s) for a, b, s in cfg])
        self.head = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(x.mean((2, 3)))


if __name__ == "__main__":
    torch.manual_seed(0)
    model = TinyMobileNet().eval()
    images = torch.randn(8, 3, 64, 64)
    with torch.no_grad():
        logits = model(images)
    print(logits.shape, logits.argmax(-1)[:4].tolist())


def build(batch=8):
    torch.manual_seed(0)
    return TinyMobileNet().eval(), (torch.randn(batch, 3, 64, 64),)
