"""Seed 003: a tensor's memory use (element_size x nelement) and the device it lives on, as the
page writes it ('cuda' -> `device`), then what the device's allocator reports (torch.cuda's
memory queries; lines marked "# --- check" are not on the page)."""
import tessera as torch
from example_device import device

# create a tensor and move it to the GPU
tensor = torch.randn(1000, 1000).to(device)

# print the memory usage of the tensor
print(tensor.element_size() * tensor.nelement() / 1024 / 1024, "MB")

# Create a tensor
small = torch.tensor([1, 2, 3])

# Check the current device of the tensor
print(small.device)
print(tensor.device)  # --- check

# --- check: the allocator's view (torch.cuda.memory_allocated and friends)
print("allocated:", torch.cuda.memory_allocated(device), "bytes")
print("peak:", torch.cuda.max_memory_allocated(device), "bytes")
print("reserved:", torch.cuda.memory_reserved(device), "bytes")
del tensor
torch.cuda.empty_cache(device)
print("after del:", torch.cuda.memory_allocated(device), "bytes allocated")
