"""Seed 002: linear regression in NumPy and in PyTorch on the CPU and the GPU (".cuda()" and
device='cuda' -> `device`), and the SimpleNN of its autograd section, as the page writes them.
Lines marked "# --- check" are not on the page: they print the losses for the test suite."""
import numpy as np

import tessera as torch
import tessera.nn as nn
from example_device import device

torch.manual_seed(0)
np.random.seed(0)

# Create a tensor and move it to GPU
x = torch.tensor([1, 2, 3]).to(device)

# In-place addition in PyTorch
a = torch.tensor([1, 2, 3])
a.add_(5)  # Adds 5 to each element of tensor 'a' directly
print("in place:", a.tolist(), "on", x.device)

# ----- NumPy
X = np.random.rand(100, 10)
y = np.random.rand(100, 1)
W = np.random.rand(10, 1)
for epoch in range(1000):
    predictions = np.dot(X, W)
    error = predictions - y
    loss = np.mean(error ** 2)
    gradient = np.dot(X.T, error) / X.shape[0]
    W -= 0.01 * gradient
print("numpy: loss %.4f" % loss)


# ----- PyTorch (CPU)
# Dummy data
X = torch.rand(100, 10)
y = torch.rand(100, 1)

# Dummy weights
W = torch.rand(10, 1, requires_grad=True)
first = torch.mean((X.mm(W) - y) ** 2).item()  # --- check

# Simple linear regression
optimizer = torch.optim.SGD([W], lr=0.01)

for epoch in range(1000):
    optimizer.zero_grad()
    predictions = X.mm(W)
    error = predictions - y
    loss = torch.mean(error ** 2)
    loss.backward()
    optimizer.step()
print("cpu: loss %.4f -> %.4f" % (first, loss.item()))  # --- check

# ----- PyTorch (GPU)
# Dummy data
X = torch.rand(100, 10).to(device)
y = torch.rand(100, 1).to(device)

# Dummy weights
W = torch.rand(10, 1, requires_grad=True, device=device)
first = torch.mean((X.mm(W) - y) ** 2).item()  # --- check

# Simple linear regression
optimizer = torch.optim.SGD([W], lr=0.01)

for epoch in range(1000):
    optimizer.zero_grad()
    predictions = X.mm(W)
    error = predictions - y
    loss = torch.mean(error ** 2)
    loss.backward()
    optimizer.step()
print("%s: loss %.4f -> %.4f" % (device, first, loss.item()))  # --- check


# ----- Autograd: SimpleNN with nn.Linear and MSELoss, on the GPU
class SimpleNN(nn.Module):
    def __init__(self):
        super(SimpleNN, self).__init__()
        self.linear = nn.Linear(10, 1)

    def forward(self, x):
        return self.linear(x)


X = torch.rand(100, 10).to(device)
y = torch.rand(100, 1).to(device)

model = SimpleNN().to(device)
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

first = criterion(model(X), y).item()  # --- check
for epoch in range(1000):
    optimizer.zero_grad()
    predictions = model(X)
    loss = criterion(predictions, y)
    loss.backward()
    optimizer.step()

# Efficient memory management
with torch.no_grad():  # Reduces memory usage by not tracking gradients
    output = model(X)
print("SimpleNN on %s: loss %.4f -> %.4f, output requires_grad=%s"
      % (device, first, loss.item(), output.requires_grad))
