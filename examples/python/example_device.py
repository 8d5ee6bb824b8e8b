"""example_device.py — the device the seed programs call "cuda": the GPU when there is one, else
the host-simulated sim:0 (configured here when the environment did not), or TESSERA_DEVICE
("cpu", "sim:0", "cuda:1"...) when set. The examples import `device` from here; it is the only
line of each that the seed pages do not have besides `import tessera as torch`."""
import os

import tessera

device = os.environ.get("TESSERA_DEVICE") or ("cuda" if tessera.cuda.is_available() else "sim:0")
if device.startswith("sim") and tessera.sim.device_count() < 2:
    tessera.sim.configure(2)
if device != "cuda":
    print("(running the page's 'cuda' parts on %s)" % device)
