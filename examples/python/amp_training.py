"""Seed 001: mixed precision with autocast and GradScaler, as the page writes it
(torch.cuda.amp -> tessera.cuda.amp, whose "cuda" is the accelerator: sim:0 without a GPU)."""
import tessera as torch
import tessera.nn as nn
import tessera.optim as optim
from tessera.cuda.amp import GradScaler, autocast
from example_device import device as accelerator

torch.manual_seed(0)

# Check if GPU is available
device = torch.device(accelerator)  # the page: "cuda" if torch.cuda.is_available() else "cpu"


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


# Instantiate the model and move it to the GPU
model = SimpleNN().to(device)

# Define loss function and optimizer
criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(model.parameters(), lr=0.01)

# Create a GradScaler for mixed precision training
scaler = GradScaler()

# Dummy input and target tensors, moved to GPU
input_tensor = torch.randn(64, 784).to(device)
target_tensor = torch.randint(0, 10, (64,)).to(device)

# Forward pass with autocast for mixed precision
with autocast():
    output = model(input_tensor)
    loss = criterion(output, target_tensor)

# Backward pass and optimization with GradScaler
scaler.scale(loss).backward()
scaler.step(optimizer)
scaler.update()

# --- check (not on the page): the output's dtype inside autocast, and the loss after the step
with torch.no_grad():
    after = criterion(model(input_tensor), target_tensor)
print("output dtype %s on %s" % (output.dtype, output.device))
print("loss %.4f -> %.4f, scale %.1f" % (loss.item(), after.item(), scaler.get_scale()))
