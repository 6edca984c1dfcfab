"""Audit a user's own release — their encoder, their encrypted data, their classifier — into one report.

``reconguard.audit.encoder(model, data, …)``, ``.encrypted(folder, …)`` and ``.classifier(model, …)`` return result
dataclasses; ``reconguard audit encoder|encrypted|classifier`` is a thin layer over them, and
:func:`write_audit_report` writes the folder (``report.html`` with the verdict table on top, PNG plots,
``results.json``). This room composes bounds, attacks and metrics; it holds no maths of its own.
"""

from .classifier import ClassifierAudit, classifier
from .encoder import EncoderAudit, encoder
from .encrypted import EncryptedAudit, RecoveryRow, encrypted
from .loading import ImageModel, load_images, load_model

__all__ = ["encoder", "EncoderAudit", "encrypted", "EncryptedAudit", "RecoveryRow", "classifier", "ClassifierAudit",
           "load_model", "load_images", "ImageModel"]
