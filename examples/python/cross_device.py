"""Seed 000: tensors on the CPU and the GPU ('cuda' -> `device`): a transfer and back, a sequence
of operations on the device, autograd across devices — and the error when devices mix, raised as
a catchable exception (PyTorch's rule and message: no silent copy). The page's programs, with
`import tessera as torch`; lines marked "# --- check" are not on the page."""
import tessera as torch
from example_device import device

# ----- Transferring tensors between CPU and GPU
# Create a tensor on the CPU
cpu_tensor = torch.tensor([1.0, 2.0, 3.0])

# Transfer the tensor to the GPU
gpu_tensor = cpu_tensor.to(device)

# Perform an operation on the GPU tensor
gpu_result = gpu_tensor * 2

# Transfer the result back to the CPU
cpu_result = gpu_result.to('cpu')

print(cpu_result)

# ----- Minimizing data transfers
cpu_tensor = torch.tensor([1.0, 2.0, 3.0])
gpu_tensor = cpu_tensor.to(device)

# Perform a sequence of operations on the GPU tensor
gpu_tensor = gpu_tensor * 2
gpu_tensor = gpu_tensor + 1
gpu_tensor = torch.sqrt(gpu_tensor)

# Transfer the result back to the CPU
cpu_result = gpu_tensor.to('cpu')

print(cpu_result)

# ----- Autograd with cross-device tensors
# Create tensors on different devices
cpu_tensor = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
gpu_tensor = torch.tensor([4.0, 5.0, 6.0], device=device, requires_grad=True)

# Transfer the CPU tensor to the GPU
gpu_tensor2 = cpu_tensor.to(device)

# Perform an operation involving tensors on the GPU
result = gpu_tensor + gpu_tensor2

# Compute the gradient
result.backward(torch.tensor([1.0, 1.0, 1.0], device=device))

print(cpu_tensor.grad)

# ----- "operations cannot be performed directly on tensors residing on different devices"
try:
    torch.tensor([1.0, 2.0, 3.0]) + torch.tensor([4.0, 5.0, 6.0], device=device)
    print("no error: both tensors are on the cpu")  # --- check (TESSERA_DEVICE=cpu)
except RuntimeError as e:  # tessera.DeviceError, a RuntimeError as in PyTorch
    print("caught %s: %s" % (type(e).__name__, e))
