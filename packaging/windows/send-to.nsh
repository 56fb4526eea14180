; "Send to > gpen-watch" in Explorer's menu, for the installer (gpen-watch.nsi): a shortcut in this
; user's SendTo folder to send-to.cmd, which runs `gpen-watch submit` on the files chosen.
; Never run here: Explorer is not on this project's machines (README.md beside this file).
;
; In gpen-watch.nsi: !include "send-to.nsh" after the other includes; !insertmacro
; GpenWatchSendToInstall in Section "gpen-watch" after File /r; !insertmacro
; GpenWatchSendToUninstall in Section "Uninstall".

!macro GpenWatchSendToInstall
  File "${__FILEDIR__}\send-to.cmd"
  CreateShortcut "$SENDTO\gpen-watch.lnk" "$INSTDIR\send-to.cmd" "" \
    "$INSTDIR\_internal\gpen_watch\data\gpen-watch.ico" 0 SW_SHOWNORMAL "" \
    "Restore the faces in these photos with gpen-watch"
!macroend

!macro GpenWatchSendToUninstall
  Delete "$SENDTO\gpen-watch.lnk"
  Delete "$INSTDIR\send-to.cmd"
!macroend
