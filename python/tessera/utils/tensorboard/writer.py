"""SummaryWriter and FileWriter with torch.utils.tensorboard's API and folder layout, writing
TensorBoard event files through the C library (ts_event_file: record framing and CRC-32C); the
messages are encoded by _proto without the protobuf or tensorboard packages."""
import itertools
import os
import socket
import time
import warnings
from datetime import datetime

from ... import _C
from . import _proto as pb
from . import summary as S
from ._embedding import write_embedding

_uid = itertools.count()


class FileWriter:
    """One event file in log_dir, named as TensorBoard's EventFileWriter names it:
    events.out.tfevents.<time:010d>.<host>.<pid>.<n><filename_suffix>. Events are buffered and
    reach the file every max_queue events, when flush_secs have passed since the last flush (checked
    as events arrive: there is no background thread), at flush() and at close()."""

    def __init__(self, log_dir, max_queue=10, flush_secs=120, filename_suffix=""):
        self._log_dir = str(log_dir)
        os.makedirs(self._log_dir, exist_ok=True)
        now = time.time()
        name = "events.out.tfevents.%010d.%s.%s.%s%s" % (now, socket.gethostname(), os.getpid(),
                                                         next(_uid), filename_suffix)
        self._path = os.path.join(self._log_dir, name)
        self._handle = _C._event_file_create(self._path, now)
        self._max_queue = max(int(max_queue), 1)
        self._flush_secs = flush_secs
        self._pending = 0
        self._last_flush = now

    def get_logdir(self):
        return self._log_dir

    @property
    def path(self):
        """The event file's path."""
        return self._path

    def add_event(self, event_bytes):
        if self._handle is None:
            raise ValueError(f"SummaryWriter: the event file {self._path} is closed")
        _C._event_file_write(self._handle, event_bytes)
        self._pending += 1
        if self._pending >= self._max_queue or time.time() - self._last_flush >= self._flush_secs:
            self.flush()

    def add_summary(self, summary_bytes, global_step=None, walltime=None):
        walltime = time.time() if walltime is None else walltime
        step = None if global_step is None else int(global_step)
        self.add_event(pb.event(walltime, step, summary=summary_bytes))

    def flush(self):
        if self._handle is not None:
            _C._event_file_flush(self._handle)
        self._pending = 0
        self._last_flush = time.time()

    def close(self):
        if self._handle is not None:
            handle, self._handle = self._handle, None
            _C._event_file_close(handle)


class SummaryWriter:
    """Writes TensorBoard summaries into event files under log_dir, as torch.utils.tensorboard's
    SummaryWriter does (same folder layout, file names, tags and messages); needs neither the
    tensorboard nor the protobuf package. Not written: graphs (add_graph warns once), audio, video,
    meshes, custom scalar layouts, tensors, boxes (they raise NotImplementedError)."""

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120,
                 filename_suffix=""):
        if not log_dir:
            current_time = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", current_time + "_" + socket.gethostname() + comment)
        self.log_dir = str(log_dir)
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self.file_writer = self.all_writers = None
        self._graph_warned = False
        self._get_file_writer()

    def _get_file_writer(self):
        """The default FileWriter, made again after close() (as PyTorch's)."""
        if self.all_writers is None or self.file_writer is None:
            self.file_writer = FileWriter(self.log_dir, self.max_queue, self.flush_secs,
                                          self.filename_suffix)
            self.all_writers = {self.file_writer.get_logdir(): self.file_writer}
            if self.purge_step is not None:
                # TensorBoard hides the events of steps >= purge_step written before this restart
                step = int(self.purge_step)
                self.file_writer.add_event(pb.event(time.time(), step,
                                                    file_version="brain.Event:2"))
                self.file_writer.add_event(pb.event(time.time(), step,
                                                    session_log=pb.session_log(pb.SESSION_START)))
                self.purge_step = None
        return self.file_writer

    def get_logdir(self):
        return self.log_dir

    # ------------------------------------------------------------ scalars
    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        self._get_file_writer().add_summary(
            S.scalar(tag, scalar_value, new_style=new_style, double_precision=double_precision),
            global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Each value into its own run log_dir/<main_tag with / as _>_<tag>, under tag main_tag."""
        walltime = time.time() if walltime is None else walltime
        fw_logdir = self._get_file_writer().get_logdir()
        for tag, value in tag_scalar_dict.items():
            fw_tag = fw_logdir + "/" + main_tag.replace("/", "_") + "_" + tag
            fw = self.all_writers.get(fw_tag)
            if fw is None:
                fw = FileWriter(fw_tag, self.max_queue, self.flush_secs, self.filename_suffix)
                self.all_writers[fw_tag] = fw
            fw.add_summary(S.scalar(main_tag, value), global_step, walltime)

    def add_tensor(self, tag, tensor, global_step=None, walltime=None):
        raise NotImplementedError("SummaryWriter.add_tensor is not supported by Tessera")

    # ------------------------------------------------------------ histograms
    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None,
                      max_bins=None):
        self._get_file_writer().add_summary(S.histogram(tag, values, bins, max_bins), global_step,
                                            walltime)

    def add_histogram_raw(self, tag, min, max, num, sum, sum_squares, bucket_limits,
                          bucket_counts, global_step=None, walltime=None):
        self._get_file_writer().add_summary(
            S.histogram_raw(tag, min, max, num, sum, sum_squares, bucket_limits, bucket_counts),
            global_step, walltime)

    # ------------------------------------------------------------ images, text
    def add_image(self, tag, img_tensor, global_step=None, walltime=None, dataformats="CHW"):
        self._get_file_writer().add_summary(S.image(tag, img_tensor, dataformats), global_step,
                                            walltime)

    def add_images(self, tag, img_tensor, global_step=None, walltime=None, dataformats="NCHW"):
        """A batch as one image: a grid of 8 columns, as PyTorch's make_grid."""
        self._get_file_writer().add_summary(
            S.image(tag, img_tensor, dataformats, fn="add_images"), global_step, walltime)

    def add_figure(self, tag, figure, global_step=None, close=True, walltime=None):
        """A matplotlib figure (or a list of them) rendered to an RGBA image; needs matplotlib."""
        try:
            import matplotlib.pyplot as plt
            import numpy as np
        except ImportError as e:
            raise ImportError("SummaryWriter.add_figure needs matplotlib (and numpy) to render "
                              "the figure: pip install matplotlib") from e

        def render(fig):
            fig.canvas.draw()
            # RGB without alpha, as PyTorch's figure_to_image
            img = np.ascontiguousarray(np.asarray(fig.canvas.buffer_rgba(), np.uint8)[:, :, :3])
            if close:
                plt.close(fig)
            return img

        if isinstance(figure, list):
            imgs = np.stack([render(f).transpose(2, 0, 1) for f in figure])
            self.add_images(tag, np.ascontiguousarray(imgs), global_step, walltime,
                            dataformats="NCHW")
        else:
            self.add_image(tag, render(figure), global_step, walltime, dataformats="HWC")

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        self._get_file_writer().add_summary(S.text(tag, text_string), global_step, walltime)

    def add_pr_curve(self, tag, labels, predictions, global_step=None, num_thresholds=127,
                     weights=None, walltime=None):
        """The pr_curves plugin's [6, T] tensor (T = num_thresholds, at most 127)."""
        self._get_file_writer().add_summary(
            S.pr_curve(tag, labels, predictions, num_thresholds, weights), global_step, walltime)

    def add_pr_curve_raw(self, tag, true_positive_counts, false_positive_counts,
                         true_negative_counts, false_negative_counts, precision, recall,
                         global_step=None, num_thresholds=127, weights=None, walltime=None):
        self._get_file_writer().add_summary(
            S.pr_curve_raw(tag, true_positive_counts, false_positive_counts, true_negative_counts,
                           false_negative_counts, precision, recall, num_thresholds, weights),
            global_step, walltime)

    def add_embedding(self, mat, metadata=None, label_img=None, global_step=None, tag="default",
                      metadata_header=None):
        """The projector's files: log_dir/<step:05d>/<tag>/tensors.tsv (and metadata.tsv,
        sprite.png) and log_dir/projector_config.pbtxt, as PyTorch writes them."""
        if not hasattr(self, "_embedding_infos"):
            self._embedding_infos = []
        write_embedding(self._get_file_writer().get_logdir(), self._embedding_infos, mat,
                        metadata, label_img, global_step, tag, metadata_header)

    # ------------------------------------------------------------ hparams
    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None,
                    global_step=None):
        """The hparams plugin's summaries and each metric as a scalar, in the run
        log_dir/<run_name> (default: the current time), as PyTorch's."""
        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("add_hparams: hparam_dict and metric_dict should be dictionaries")
        exp, ssi, sei = S.hparams(hparam_dict, metric_dict, hparam_domain_discrete)
        if not run_name:
            run_name = str(time.time())
        logdir = os.path.join(self._get_file_writer().get_logdir(), run_name)
        with SummaryWriter(log_dir=logdir) as w_hp:
            w_hp.file_writer.add_summary(exp, global_step)
            w_hp.file_writer.add_summary(ssi, global_step)
            w_hp.file_writer.add_summary(sei, global_step)
            for k, v in metric_dict.items():
                w_hp.add_scalar(k, v, global_step)

    # ------------------------------------------------------------ not written
    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True):
        """Accepted so that programs run, but no graph is written (Tessera does not trace models
        into TensorBoard's GraphDef): warns once per writer."""
        if not self._graph_warned:
            self._graph_warned = True
            warnings.warn("SummaryWriter.add_graph: Tessera does not write model graphs; "
                          "nothing was logged for the graph", stacklevel=2)

    def _unsupported(name):
        def method(self, *args, **kwargs):
            raise NotImplementedError(f"SummaryWriter.{name} is not supported by Tessera")

        method.__name__ = name
        return method

    add_audio = _unsupported("add_audio")
    add_video = _unsupported("add_video")
    add_mesh = _unsupported("add_mesh")
    add_custom_scalars = _unsupported("add_custom_scalars")
    add_image_with_boxes = _unsupported("add_image_with_boxes")
    del _unsupported

    # ------------------------------------------------------------ lifetime
    def flush(self):
        if self.all_writers is None:
            return
        for w in self.all_writers.values():
            w.flush()

    def close(self):
        if self.all_writers is None:
            return
        for w in self.all_writers.values():
            w.flush()
            w.close()
        self.file_writer = self.all_writers = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
