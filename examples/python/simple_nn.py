"""Seed 001: SimpleNN on the CPU and on the GPU ("cuda" -> `device`, see example_device.py).
The page's programs, with `import tessera as torch`; the lines after "# --- check" are not on the
page: they print the loss so the test suite can see the step lowered it."""
import tessera as torch
import tessera.nn as nn
import tessera.optim as optim
from example_device import device

torch.manual_seed(0)


# Define a simple neural network model
class SimpleNN(nn.Module):
    def __init__(self):
        super(SimpleNN, self).__init__()
        self.fc1 = nn.Linear(784, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = self.fc2(x)
        return x


# ----- CPU example
# Instantiate the model
model = SimpleNN()

# Define loss function and optimizer
criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(model.parameters(), lr=0.01)

# Dummy input and target tensors
input_tensor = torch.randn(64, 784)
target_tensor = torch.randint(0, 10, (64,))

# Forward pass
output = model(input_tensor)
loss = criterion(output, target_tensor)

# Backward pass and optimization
loss.backward()
optimizer.step()

# --- check
after = criterion(model(input_tensor), target_tensor)
print("cpu: loss %.4f -> %.4f" % (loss.item(), after.item()))

# ----- GPU example: the model and the tensors moved to the device
model = SimpleNN().to(device)
criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(model.parameters(), lr=0.01)

input_tensor = torch.randn(64, 784).to(device)
target_tensor = torch.randint(0, 10, (64,)).to(device)

output = model(input_tensor)
loss = criterion(output, target_tensor)

optimizer.zero_grad()
loss.backward()
optimizer.step()

# --- check
after = criterion(model(input_tensor), target_tensor)
print("%s: loss %.4f -> %.4f (output on %s)" % (device, loss.item(), after.item(), output.device))
