"""Seed 000: data prepared on the CPU (transforms, DataLoader with 2 workers), SimpleCNN trained
on the GPU ('cuda' -> `device`). torchvision's names come from tessera.vision. CIFAR-10 is read from
./data when it is there; else Fashion-MNIST (Debian's dataset-fashion-mnist), padded to 32 x 32
and repeated over 3 channels so the page's network takes it unchanged. TESSERA_EXAMPLE_STEPS=N
stops each epoch after N mini-batches (the test suite's short run). Lines marked "# --- check"
are not on the page."""
import os

import tessera as torch
import tessera.vision.transforms as transforms
from tessera.vision.datasets import CIFAR10, FashionMNIST
from tessera.utils.data import DataLoader
from example_device import device

torch.manual_seed(0)
steps = int(os.environ.get("TESSERA_EXAMPLE_STEPS", "0"))  # --- check: 0 = whole epochs

# Define a data transformation
transform = transforms.Compose([
    transforms.ToTensor(),
    transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
])

# Load the dataset
if os.path.isdir('./data/cifar-10-batches-bin'):
    trainset = CIFAR10(root='./data', train=True, download=True, transform=transform)
else:  # --- not on the page: Fashion-MNIST in CIFAR-10's shape
    print("(no CIFAR-10 in ./data: Fashion-MNIST padded to 3 x 32 x 32)")
    trainset = FashionMNIST(train=True, transform=transforms.Compose([
        transforms.ToTensor(), transforms.Pad(2), transforms.Grayscale(num_output_channels=3),
        transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))]))
trainloader = DataLoader(trainset, batch_size=64, shuffle=True, num_workers=2)


# Define a simple neural network
class SimpleCNN(torch.nn.Module):
    def __init__(self):
        super(SimpleCNN, self).__init__()
        self.conv1 = torch.nn.Conv2d(3, 6, 5)
        self.pool = torch.nn.MaxPool2d(2, 2)
        self.conv2 = torch.nn.Conv2d(6, 16, 5)
        self.fc1 = torch.nn.Linear(16 * 5 * 5, 120)
        self.fc2 = torch.nn.Linear(120, 84)
        self.fc3 = torch.nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(torch.nn.functional.relu(self.conv1(x)))
        x = self.pool(torch.nn.functional.relu(self.conv2(x)))
        x = x.view(-1, 16 * 5 * 5)
        x = torch.nn.functional.relu(self.fc1(x))
        x = torch.nn.functional.relu(self.fc2(x))
        x = self.fc3(x)
        return x


# Initialize the network and transfer it to the GPU
net = SimpleCNN().to(device)

# Define a loss function and optimizer
criterion = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.001, momentum=0.9)

# Training loop
for epoch in range(2):  # loop over the dataset multiple times
    running_loss = 0.0
    for i, data in enumerate(trainloader, 0):
        if steps and i == steps:  # --- check: the short run
            break
        # Get the inputs; data is a list of [inputs, labels]
        inputs, labels = data

        # Transfer inputs and labels to the GPU
        inputs, labels = inputs.to(device), labels.to(device)

        # Zero the parameter gradients
        optimizer.zero_grad()

        # Forward pass
        outputs = net(inputs)
        loss = criterion(outputs, labels)

        # Backward pass and optimize
        loss.backward()
        optimizer.step()

        # Print statistics
        running_loss += loss.item()
        if i % 200 == 199:  # print every 200 mini-batches
            print(f'[Epoch: {epoch + 1}, Mini-batch: {i + 1}] loss: {running_loss / 200}')
            running_loss = 0.0

print('Finished Training')
