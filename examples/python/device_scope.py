"""Seed 004: TensorFlow's `with tf.device(...)`, tf.constant and tf.identity, in Tessera: inside
tessera.device_scope(d) tensors made without device= land on d; a copy to the cpu brings the
result back (an explicit .to(), as tf.identity under tf.device('/CPU:0')). The page gives no
code: this is the program it describes."""
import tessera as torch
from example_device import device

with torch.device_scope(device):  # with tf.device('/GPU:0'):
    a = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])  # tf.constant
    b = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    c = a @ b  # runs where a and b are

with torch.device_scope("cpu"):  # with tf.device('/CPU:0'): c_cpu = tf.identity(c)
    c_cpu = c.to(torch.get_default_device())

print("a lives on %s, c on %s, its copy on %s" % (a.device, c.device, c_cpu.device))
print(c_cpu)
print(c_cpu.to(torch.int32))  # tf.cast: a dtype conversion is a copy too
