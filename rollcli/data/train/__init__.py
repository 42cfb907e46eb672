"""Training data shipped with rollcli (DeepScaleR MATH train split); see ../PROVENANCE.md."""
