"""Train a timm model for a few steps on random data: plain PyTorch code (import torch, timm).
On Tessera, unedited: python -m tessera.compat examples/python/timm_train.py"""
import torch
import timm

torch.manual_seed(0)
model = timm.create_model("resnet18", pretrained=False, num_classes=10)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
x = torch.randn(8, 3, 64, 64)
y = torch.randint(0, 10, (8,))
model.train()
for step in range(5):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    print(f"step {step}: loss {loss.item():.4f}")
print("torch", torch.__version__, "timm", timm.__version__)
