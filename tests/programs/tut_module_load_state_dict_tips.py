# tessera-corpus: source pytorch/tutorials@06059c5ed41b731d4d3392d18d417fd267246e05 recipes_source/recipes/module_load_state_dict_tips.py
"""

Tips for Loading an `nn.Module` from a Checkpoint
=================================================
(the recipe's prose comments are left out here; the code is as written)
"""

import tessera as torch  # tessera-corpus: was `import torch`
from tessera import nn  # tessera-corpus: was `from torch import nn`

class SomeModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linears = nn.ModuleList([nn.Linear(1, 1) for i in range(10)])

    def forward(self, x):
        return self.linears(x)


m = SomeModule()
torch.save(m.state_dict(), 'checkpoint.pth')
state_dict = torch.load('checkpoint.pth', mmap=True)
with torch.device('meta'):
  meta_m = SomeModule()
meta_m.load_state_dict(state_dict, assign=True)


state_dict = torch.load('checkpoint.pth')
m = SomeModule()
m.load_state_dict(state_dict)


state_dict = torch.load('checkpoint.pth')


state_dict = torch.load('checkpoint.pth', mmap=True)


# def my_special_routine(t):
#     # for example, post training quantization and move t to device
#     pass

# def my_processing_function(key, device):
#     t = state_dict[key]
#     processed_t = my_special_routine(t)
#     del t
#     return processed_t

# for key in state_dict.keys():
#     device = 'cuda' + str(int(key[0]) % 8)
#     state_dict[key] = my_processing_function(key, device)


# Next, we consider the creation of the module.

m = SomeModule()


with torch.device('meta'):
  meta_m = SomeModule()


m.load_state_dict(state_dict)


meta_m.load_state_dict(state_dict, assign=True)
