# tessera-corpus: source pytorch/tutorials@0a7e68666de5faceafa90276ad2b7874cd32c5e0 recipes_source/recipes/warmstarting_model_using_parameters_from_a_different_model.py
"""
Warmstarting model using parameters from a different model in PyTorch
=====================================================================
(the recipe's prose comments are left out here; the code is as written)
"""

import tessera as torch  # tessera-corpus: was `import torch`
import tessera.nn as nn  # tessera-corpus: was `import torch.nn as nn`
import tessera.optim as optim  # tessera-corpus: was `import torch.optim as optim`


class NetA(nn.Module):
    def __init__(self):
        super(NetA, self).__init__()
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

netA = NetA()

class NetB(nn.Module):
    def __init__(self):
        super(NetB, self).__init__()
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

netB = NetB()


# Specify a path to save to
PATH = "model.pt"

torch.save(netA.state_dict(), PATH)


netB.load_state_dict(torch.load(PATH), strict=False)
