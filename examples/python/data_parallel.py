"""Seed 003: nn.DataParallel(model) and the usual loop over a data loader, as the page writes it
('cuda:0' -> the first of `devices`): each batch is split over the devices (every GPU, else
sim:0 and sim:1). The page leaves the architecture, the data and num_epochs out: here they are a
small MLP and four Gaussian clusters. Lines marked "# --- check" are not on the page."""
import tessera as torch
import tessera.nn as nn
from tessera.utils.data import DataLoader, TensorDataset
from example_device import device

torch.manual_seed(0)
dev0 = torch.device(device if ":" in device or device == "cpu" else device + ":0")


class MyModel(nn.Module):
    def __init__(self):
        super(MyModel, self).__init__()
        # Define your neural network architecture here
        self.fc1 = nn.Linear(20, 64)
        self.fc2 = nn.Linear(64, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


# the data (not on the page): four Gaussian clusters in 20 dimensions
centres = torch.randn(4, 20) * 0.45
targets = torch.randint(0, 4, (1024,))
data_loader = DataLoader(TensorDataset(centres[targets] + torch.randn(1024, 20), targets),
                         batch_size=64, shuffle=True, num_workers=2)
num_epochs = 4

model = MyModel().to(dev0)  # move the model to GPU
model = nn.DataParallel(model)

criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

for epoch in range(num_epochs):
    total = 0.0  # --- check
    for inputs, labels in data_loader:
        inputs, labels = inputs.to(dev0), labels.to(dev0)
        outputs = model(inputs)
        loss = criterion(outputs, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()  # --- check
    print("epoch %d: mean loss %.4f" % (epoch + 1, total / len(data_loader)))  # --- check
print("outputs on %s, %d rows" % (outputs.device, outputs.shape[0]))  # --- check
