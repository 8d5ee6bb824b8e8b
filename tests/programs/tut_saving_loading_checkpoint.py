# tessera-corpus: source pytorch/tutorials@0a7e68666de5faceafa90276ad2b7874cd32c5e0 recipes_source/recipes/saving_and_loading_a_general_checkpoint.py
"""
Saving and loading a general checkpoint in PyTorch
==================================================
(the recipe's prose comments are left out here; the code is as written)
"""

import tessera as torch  # tessera-corpus: was `import torch`
import tessera.nn as nn  # tessera-corpus: was `import torch.nn as nn`
import tessera.optim as optim  # tessera-corpus: was `import torch.optim as optim`


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.flatten(start_dim=1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x

net = Net()
print(net)


optimizer = optim.SGD(net.parameters(), lr=0.001, momentum=0.9)


# Additional information
EPOCH = 5
PATH = "model.pt"
LOSS = 0.4

torch.save({
            'epoch': EPOCH,
            'model_state_dict': net.state_dict(),
            'optimizer_state_dict': optimizer.state_dict(),
            'loss': LOSS,
            }, PATH)


model = Net()
optimizer = optim.SGD(net.parameters(), lr=0.001, momentum=0.9)

checkpoint = torch.load(PATH)
model.load_state_dict(checkpoint['model_state_dict'])
optimizer.load_state_dict(checkpoint['optimizer_state_dict'])
epoch = checkpoint['epoch']
loss = checkpoint['loss']

model.eval()
# - or -
model.train()
